"""The torch_npu / MindSpore result-directory layout (framework.md; docs/framework-plan.md): not wired yet.
schema.py holds the tables the FRAMEWORK decoders (msprof.decode.framework) fill."""
