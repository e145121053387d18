"""msprof-analyze compare and advisor on two pairs of torch_npu result directories, results compared side by side.

usage: msa_ascend_pt.py ORACLES_DIR OUT OURS_BASE OURS_NEW THEIRS_BASE THEIRS_NEW

The two pairs are the same two runs, their ASCEND_PROFILER_OUTPUT written by msprof (ours) and by torch_npu's
analysis (theirs). On each side, with its CWD in OUT/<side>/cwd (the advisor writes a file there):
  compare   msprof-analyze compare -d NEW -bp BASE -o OUT/<side>/compare
  advisor   msprof-analyze advisor all -d BASE -o OUT/<side>/advisor
then every file either wrote (but its HTML page, which shows the same as its xlsx) is compared with the other
side's: every xlsx sheet cell by cell, with ../shared/oracles' rules (consumers.py); the advisor's complaints
about missing inputs in its log too. The input directories' parents are replaced by "<SIDE>" in the cells.
Prints one PASS/FAIL line per check and "msa_ascend_pt: X/Y checks passed"; exit 0 only when all pass.
Runs under the oracles' venv (openpyxl, msprof-analyze): it re-executes itself there.
"""
import os
import sys

sys.path.insert(0, os.path.abspath(sys.argv[1]))
import _common as C  # noqa: E402  (../shared/oracles)
import consumers as K  # noqa: E402

SIDES = ("ours", "theirs")
TIMEOUT = 300


def results(folder):
    """{file name without its time stamp: path} of what a tool wrote under ``folder``."""
    found = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            if not name.endswith((".html", ".log")):
                path = os.path.join(root, name)
                found[K.norm_name(os.path.relpath(path, folder))] = path
    return found


def run_tools(out, side, base, new):
    """Runs compare and advisor on one side; {tool: exit code, or a word on a timeout}."""
    where = os.path.join(out, side)
    cwd = os.path.join(where, "cwd")
    os.makedirs(cwd, exist_ok=True)
    env = dict(os.environ, MSPROF_ANALYZE_LOG_LEVEL="INFO")
    codes = {}
    for tool, args in (("compare", ["compare", "-d", new, "-bp", base]), ("advisor", ["advisor", "all", "-d", base])):
        rc, late = C.run(K.msa(*args, "-o", os.path.join(where, tool)), TIMEOUT, cwd=cwd, env=env,
                         log=os.path.join(where, tool + ".log"))
        codes[tool] = "timed out" if late else rc
    return codes


def main():
    oracles, out, ours_base, ours_new, theirs_base, theirs_new = sys.argv[1:7]
    C.ensure_venv(__file__)
    codes = {"ours": run_tools(out, "ours", ours_base, ours_new),
             "theirs": run_tools(out, "theirs", theirs_base, theirs_new)}
    subst = {side: [(os.path.dirname(os.path.dirname(base)), "<SIDE>")]
             for side, base in (("ours", ours_base), ("theirs", theirs_base))}
    subst["ref"] = subst.pop("theirs")
    ck = C.Checks("msa_ascend_pt")
    for tool in ("compare", "advisor"):
        ck.add("%s: ran on both" % tool, codes["ours"][tool] == 0 == codes["theirs"][tool],
               "exit ours %s, theirs %s" % (codes["ours"][tool], codes["theirs"][tool]))
        files = {side: results(os.path.join(out, side, tool)) for side in SIDES}
        ck.add("%s: same result files (%s)" % (tool, ", ".join(sorted(files["theirs"])) or "none"),
               sorted(files["ours"]) == sorted(files["theirs"]) and files["theirs"],
               "ours %s, theirs %s" % (sorted(files["ours"]), sorted(files["theirs"])))
        K.compare_files(ck, tool, files["theirs"], files["ours"], subst)
    found = {side: K.advisor_inputs(os.path.join(out, side, "advisor.log")) for side in SIDES}
    ck.add("advisor: same input data found (log lines on missing inputs)", found["ours"] == found["theirs"],
           "only ours: %s; only theirs: %s" % (sorted(found["ours"] - found["theirs"])[:3],
                                               sorted(found["theirs"] - found["ours"])[:3]))
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())
