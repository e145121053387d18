"""msprof.tracecheck: each rule accepts good traces and catches a hand-made violation."""
import copy
import json

import pytest

from msprof.tracecheck import MAX_FLOW_ID, TraceError, assert_valid, check_trace


def meta(pid=1, tid=2):
    return [
        {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": "P"}},
        {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": "T"}},
        {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": 0}},
    ]


def x(ts, dur, name="a", pid=1, tid=2):
    return {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": name}


def flow(ph, ts, id_=1, pid=1, tid=2, cat="HostToDevice", name="HostToDevice"):
    event = {"ph": ph, "cat": cat, "name": name, "id": id_, "pid": pid, "tid": tid, "ts": ts}
    if ph == "f":
        event["bp"] = "e"
    return event


def trace(*events, metadata=True):
    return {"traceEvents": (meta() if metadata else []) + list(events), "displayTimeUnit": "ms", "otherData": {}}


GOOD = trace(x(0, 10), x(1, 2), x(3, 0), x(10, 5), x(10, 5), flow("s", 2), flow("f", 12))


def test_good_trace_is_valid():
    assert check_trace(GOOD) == []
    assert check_trace({"traceEvents": []}) == []


def test_the_cann_layout_array_with_string_times():
    """The CANN layout's timeline (docs/prof.md): an array, ``ts`` µs since the epoch as strings, string flow
    ids; its times are compared exactly (a float of 1.7e15 µs steps by 0.25 µs: 0.001 µs apart would be equal)."""
    base = "1700000861430"
    slices = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": base + "728.089", "dur": 1.0},
              {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": base + "728.090", "dur": 0.5},
              {"ph": "s", "name": "f", "cat": "c", "id": "7", "pid": 1, "tid": 1, "ts": base + "728.100"},
              {"ph": "f", "name": "f", "cat": "c", "id": "7", "pid": 1, "tid": 1, "ts": base + "728.200", "bp": "e"}]
    assert check_trace(slices) == []
    # a task's executions share its flow id: each start pairs with the next end of its id
    again = [dict(e, ts=base + "729" + e["ts"][-4:]) for e in slices]
    assert check_trace(slices + again) == []
    # a start without its end is the layout's (the flow of a task left out by the time filter), an end alone not
    assert check_trace(slices + again[:3]) == []
    assert "has a 'f' but no 's'" in check_trace(slices + slices[3:])[0]
    crossing = slices[:1] + [dict(slices[1], dur=1.0)]
    assert any("nest" in p or "overlap" in p for p in check_trace(crossing)), check_trace(crossing)


def test_equal_boundaries_and_nesting_allowed():
    assert check_trace(trace(x(0, 10), x(0, 10), x(0, 4), x(4, 6), x(10, 0), x(10.0005, 1))) == []


@pytest.mark.parametrize("obj, fragment", [
    (5, "not a JSON object"),
    ({"events": []}, "no traceEvents"),
    ({"traceEvents": {}}, "no traceEvents"),
    ({"traceEvents": [], "displayTimeUnit": "s"}, "displayTimeUnit"),
])
def test_top_level(obj, fragment):
    problems = check_trace(obj)
    assert problems and fragment in problems[0]


def test_metadata_after_first_event():
    bad = trace(x(0, 1), meta()[0])
    assert any("metadata event after" in p for p in check_trace(bad))


@pytest.mark.parametrize("field, value", [("ts", "1.5"), ("dur", "2"), ("ts", float("nan")),
                                          ("dur", float("inf")), ("dur", -0.001), ("ts", True)])
def test_bad_numbers(field, value):
    event = x(0, 1)
    event[field] = value
    problems = check_trace(trace(event))
    assert len(problems) == 1 and field in problems[0]


@pytest.mark.parametrize("event, missing", [
    ({"ph": "X", "pid": 1, "tid": 2, "ts": 0, "name": "a"}, "dur"),
    ({"ph": "X", "pid": 1, "ts": 0, "dur": 1, "name": "a"}, "tid"),
    ({"ph": "s", "pid": 1, "tid": 2, "ts": 0, "name": "a", "cat": "c"}, "id"),
    ({"ph": "f", "pid": 1, "tid": 2, "ts": 0, "name": "a", "id": 1}, "cat"),
    ({"ph": "M", "pid": 1, "name": "thread_name", "args": {"name": "T"}}, "tid"),
])
def test_required_keys(event, missing):
    problems = check_trace(trace(event, metadata=False))
    assert problems and f"missing {missing}" in problems[0]


def test_metadata_args_and_unknown_phase():
    assert "needs args.name" in check_trace(trace({"ph": "M", "pid": 1, "tid": 0, "name": "process_name",
                                                   "args": {}}))[0]
    assert "sort_index must be an integer" in check_trace(
        trace({"ph": "M", "pid": 1, "tid": 2, "name": "thread_sort_index", "args": {"sort_index": "1"}}))[0]
    assert "unknown or missing ph" in check_trace(trace({"ph": "Q", "pid": 1}))[0]
    assert "pid/tid must be integers" in check_trace(trace(x(0, 1, pid="1")))[0]


def test_partial_overlap_is_caught():
    problems = check_trace(trace(x(0, 10), x(5, 10)))
    assert len(problems) == 1 and "partially overlaps" in problems[0]
    # the same intervals on two threads are fine
    assert check_trace(trace(x(0, 10), x(5, 10, tid=3))) == []
    # overlap by one ns at µs resolution 3 decimals
    assert check_trace(trace(x(0, 10.001), x(10, 1)))


def test_out_of_order_events_are_sorted_per_thread():
    assert check_trace(trace(x(10, 5), x(0, 10), x(2, 3))) == []
    problems = check_trace(trace(x(10, 5), x(0, 12)))
    assert len(problems) == 1 and "partially overlaps" in problems[0]


def test_flow_pairing():
    assert "has a 's' but no 'f'" in check_trace(trace(x(0, 10), flow("s", 1)))[0]
    assert "has a 'f' but no 's'" in check_trace(trace(x(0, 10), flow("f", 1)))[0]
    assert "second flow 's'" in check_trace(trace(x(0, 10), flow("s", 1), flow("s", 2), flow("f", 3)))[0]
    assert "names differ" in check_trace(trace(x(0, 10), flow("s", 1), flow("f", 3, name="other")))[0]
    assert "ends before it starts" in check_trace(trace(x(0, 10), flow("s", 5), flow("f", 3)))[0]
    # pairing is by (cat, id): same id in another category is another flow
    assert check_trace(trace(x(0, 10), flow("s", 1), flow("f", 2), flow("s", 3, cat="c2"), flow("f", 4, cat="c2"))) == []


@pytest.mark.parametrize("bad_id", ["1", 1.0, -1, MAX_FLOW_ID, True])
def test_flow_id_rules(bad_id):
    problems = check_trace(trace(x(0, 10), flow("s", 1, id_=bad_id), flow("f", 2, id_=bad_id)))
    assert problems and "flow id" in problems[0]


def test_flow_id_just_below_limit_is_fine():
    assert check_trace(trace(x(0, 10), flow("s", 1, id_=MAX_FLOW_ID - 1), flow("f", 2, id_=MAX_FLOW_ID - 1))) == []


def test_flow_endpoints_must_lie_on_a_slice_of_their_thread():
    # on the boundaries is fine
    assert check_trace(trace(x(0, 10), flow("s", 0), flow("f", 10))) == []
    problems = check_trace(trace(x(0, 10), flow("s", 1), flow("f", 11)))
    assert len(problems) == 1 and "not on or inside any X slice" in problems[0]
    # a slice on another thread does not count
    problems = check_trace(trace(x(0, 10), x(0, 20, tid=3), flow("s", 1), flow("f", 15)))
    assert len(problems) == 1 and "not on or inside" in problems[0]
    # the flow point may come before its slice in the file
    assert check_trace(trace(flow("s", 1), x(0, 10), flow("f", 2))) == []


def test_control_characters_in_names():
    assert "control characters" in check_trace(trace(x(0, 1, name="conv\n1")))[0]
    assert "control characters" in check_trace(trace(x(0, 1, name="conv\x851")))[0]
    bad_meta = meta()
    bad_meta[1]["args"]["name"] = "Stream\t3"
    assert "control characters" in check_trace({"traceEvents": bad_meta})[0]
    assert check_trace(trace(x(0, 1, name="卷积 conv µs"))) == []


# --- files ----------------------------------------------------------------------------------------------
def line_layout(obj) -> str:
    """The one-event-per-line layout msprof writes."""
    events = ",\n".join(json.dumps(e) for e in obj["traceEvents"])
    rest = json.dumps({k: v for k, v in obj.items() if k != "traceEvents"})[1:]
    return '{"traceEvents":[\n' + events + "\n]" + ("," + rest if rest != "}" else "}") + "\n"


def test_line_layout_file(tmp_path):
    path = tmp_path / "t.json"
    text = line_layout(GOOD)
    assert json.loads(text) == GOOD
    path.write_text(text)
    assert check_trace(path) == []
    assert_valid(path)


def test_line_layout_with_many_batches(tmp_path, monkeypatch):
    import msprof.tracerules as rules

    monkeypatch.setattr(rules, "_BATCH_LINES", 3)
    events = [x(i, 1) for i in range(20)]
    path = tmp_path / "t.json"
    path.write_text(line_layout(trace(*events)))
    assert check_trace(path) == []
    events[13] = x(12.5, 1)
    path.write_text(line_layout(trace(*events)))
    problems = check_trace(path)
    assert len(problems) == 1 and "event 16" in problems[0]   # 3 metadata events first


@pytest.mark.parametrize("mangle, fragment", [
    (lambda t: t[: len(t) // 2], "not closed"),
    (lambda t: t.replace("\n]", ",\n]"), "trailing ','"),
    (lambda t: t.replace("},\n", "}\n", 1), "missing ','"),
    (lambda t: t + "{}\n", "after the end"),
    (lambda t: t.replace('"otherData": {}', '"otherData": {'), "after the events"),
    (lambda t: t.replace('"ts": 1,', '"ts": 1,,'), "invalid JSON"),
])
def test_broken_line_layout_files(tmp_path, mangle, fragment):
    path = tmp_path / "t.json"
    path.write_text(mangle(line_layout(GOOD)))
    problems = check_trace(path)
    assert problems and fragment in problems[0], problems


def test_other_layouts_and_bad_json(tmp_path):
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(GOOD, indent=2))
    assert check_trace(path) == []
    bad = copy.deepcopy(GOOD)
    bad["traceEvents"].append(x(2, 20))
    path.write_text(json.dumps(bad, indent=2))
    assert "partially overlaps" in check_trace(path)[0]
    path.write_text("{not json")
    assert "invalid JSON" in check_trace(path)[0]
    assert "cannot read" in check_trace(tmp_path / "missing.json")[0]
    with pytest.raises(TraceError):
        assert_valid(path)


def test_problem_list_is_bounded():
    events = [x(i, 10) for i in range(500)]
    problems = check_trace(trace(*events))
    assert 10 < len(problems) <= 51 and problems[-1].startswith("...")


# --- the fast path: X lines in the exact compact shape msprof writes are checked from their text ----------
def compact_layout(obj) -> str:
    """The line layout with compact separators: X events built by x() match the checker's fast path."""
    events = ",\n".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) for e in obj["traceEvents"])
    rest = json.dumps({k: v for k, v in obj.items() if k != "traceEvents"}, separators=(",", ":"))[1:]
    return '{"traceEvents":[\n' + events + "\n]" + ("," + rest if rest != "}" else "}") + "\n"


def with_args(event, **args):
    event = dict(event)
    event["args"] = args
    return event


FAST_CASES = [
    GOOD,
    trace(*[with_args(x(i, 1), **{"Task Type": "AA_CORE", "Stream Id": 3, "Layer Id": "N/A", "v": -1.5})
            for i in range(10)]),
    trace(x(0, 10), x(5, 10)),                                   # partial overlap
    trace(x(0, 10.001), x(10, 1)),                               # by one ns
    trace(x(10, 5), x(0, 10), x(2, 3)),                          # out of order: sorted per thread
    trace(x(10, 5), x(0, 12)),
    trace(x(0, 1), meta()[0]),                                   # metadata after a fast X line
    trace(x(0, 1, name="conv\n1")),                              # escaped control character: full path
    trace(x(0, 1, name="conv\x851")),                            # raw C1 control character
    trace(x(0, 1, name='say "hi" \\ ok'), x(1, 1, name="卷积 conv µs")),
    trace(x(0, 1, name="]"), x(1, 1, name="conv[0]"), x(2, 1, name="a\n]b")),        # "]" is not the end
    trace(x(0, 1, pid=-1), x(0, 1, tid=12345678901234567890)),
    trace(x(-2.5, 1), x(1e13, 1), x(0, 1e-4), x(3, 0)),
    trace(x(0, 10), flow("s", 1), flow("f", 11)),
    {"traceEvents": [x(i, 10) for i in range(200)]},             # many problems: bounded list
]


@pytest.mark.parametrize("case", range(len(FAST_CASES)))
def test_compact_line_layout_same_verdict_as_objects(tmp_path, case):
    obj = FAST_CASES[case]
    path = tmp_path / "t.json"
    path.write_text(compact_layout(obj), encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(json.dumps(obj))
    assert check_trace(path) == check_trace(obj)


def test_compact_line_layout_with_small_chunks(tmp_path, monkeypatch):
    import msprof.tracecheck as tc
    import msprof.tracerules as rules

    monkeypatch.setattr(tc, "_CHUNK_BYTES", 50)
    monkeypatch.setattr(rules, "_BATCH_LINES", 2)
    events = [x(i, 1) for i in range(30)] + [x(30, 5), flow("s", 31), flow("f", 32), x(32, 1)]
    path = tmp_path / "t.json"
    path.write_text(compact_layout(trace(*events)))
    assert check_trace(path) == []
    events[20] = x(19.5, 1)
    path.write_text(compact_layout(trace(*events)))
    assert check_trace(path) == check_trace(trace(*events)) and len(check_trace(path)) == 1


@pytest.mark.parametrize("mangle, fragment", [
    (lambda t: t.replace("}\n]", "},\n]"), "trailing ','"),                      # after a fast X line
    (lambda t: t.replace('"ts":1,', '"ts":1,,'), "invalid JSON"),
    (lambda t: t.replace('"dur":1,', '"dur":01,'), "invalid JSON"),
    (lambda t: t.replace('"name":"a"', '"name":"a\x01"'), "invalid JSON"),      # raw control character
    (lambda t: t.replace('"ph":"X","pid":1,"tid":2,"ts":3,', '"ph":"X","pid":1,"tid":2,"ts":3,,', 1), "invalid JSON"),
    (lambda t: t[: len(t) // 2], "not closed"),
    (lambda t: t + "{}\n", "after the end"),
    (lambda t: t.replace("},\n{", "}\n{", 4), "missing ','"),
])
def test_broken_compact_line_layout_files(tmp_path, mangle, fragment):
    events = [x(i, 1) for i in range(6)] + [x(10, 5, name="a")]
    text = compact_layout(trace(*events))
    broken = mangle(text)
    assert broken != text
    path = tmp_path / "t.json"
    path.write_text(broken)
    problems = check_trace(path)
    assert problems and fragment in problems[0], problems


def test_line_layout_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(compact_layout(trace(x(0, 1, name="ab"))).encode().replace(b"ab", b"a\xff"))
    problems = check_trace(path)
    assert problems and "not UTF-8" in problems[0], problems


def test_a_line_longer_than_a_chunk(tmp_path, monkeypatch):
    import msprof.tracecheck as tc

    monkeypatch.setattr(tc, "_CHUNK_BYTES", 64)
    obj = trace(x(0, 10, name="n" * 1000), x(1, 1), x(2, 20, name="m" * 300))
    path = tmp_path / "t.json"
    path.write_text(compact_layout(obj))
    assert check_trace(path) == check_trace(obj) and len(check_trace(obj)) == 1


def test_possessive_fast_path_accepts_what_the_plain_pattern_does():
    """The fast-path pattern uses possessive quantifiers (Python 3.11+) for speed; they must not change
    which lines it accepts or what it captures: compare with the same pattern without them on mutated
    copies of msprof lines."""
    import random
    import re

    import msprof.tracerules as rules

    plain = re.compile(rules._FAST_LINE.pattern.replace("*+", "*").replace("?+", "?").replace("++", "+"), re.M)
    lines = [
        '{"ph":"X","pid":4194304,"tid":3,"ts":12018771.0,"dur":5.0,"name":"layer0","args":{"Task Type":'
        '"AA_CORE","Stream Id":3,"Task Id":1,"Layer Id":0,"Iteration":1}},',
        '{"ph":"X","pid":4242,"tid":4243,"ts":-3620.5,"dur":15000.125,"name":"svp_acl_mdl_load",'
        '"args":{"Mode":"ACL_MODEL","Process Id":4242,"Thread Id":4243,"v":-0.5,"w":""}},',
        '{"ph":"X","pid":0,"tid":0,"ts":0,"dur":0,"name":"","args":{}},',
    ]
    alphabet = '"\\,:{}[]-.0123456789eE+ aX\x01\x85µ\n'
    rng = random.Random(7)
    accepted = 0
    for _ in range(20000):
        line = rng.choice(lines)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(line) + 1)
            op = rng.random()
            if op < 0.4:
                line = line[:at] + rng.choice(alphabet) + line[at:]
            elif op < 0.8:
                line = line[:at] + line[at + 1:]
            else:
                line = line[:at] + rng.choice(alphabet) + line[at + 1:]
        got = rules._FAST_LINE.findall(line)
        assert got == plain.findall(line), line
        accepted += sum(1 for match in got if match[1])
    assert accepted > 1000          # the mutations leave many lines on the fast path
