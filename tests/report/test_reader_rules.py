#!/usr/bin/env python3
"""The report's reading of records (report/results_io.py), rule by rule, each with inputs on
both sides of it: the JSON is read as strictly as tpbench's C++ reads it (json_text.h), every
known field of a record and of run.json has its types, each problem is one line naming the
file, the line, the JSON path and the rule, and the last record of a case is the one that
counts. In-process, so that scripts/mutation_report.py (mutmut) sees which rule each test
holds."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "report"))
import results_io as rio  # noqa: E402

WHAT = "one JSON object per line"


def refusal(test, data, where="f:1", what=WHAT):
    """The one line a JSON text is refused with."""
    with test.assertRaises(rio.ReportInputError) as caught:
        rio.parse_json_bytes(data, where, what)
    return str(caught.exception)


def problem(where, text, path=None, what=WHAT):
    return f"{where}: {path + ': ' if path else ''}not valid JSON ({text}); expected {what}"


def nested(levels, open_=b"[", close=b"]"):
    return open_ * levels + close * levels


class StrictJson(unittest.TestCase):
    def test_json_has_no_nan_or_infinity(self):
        for token in ("NaN", "Infinity", "-Infinity"):
            self.assertEqual(refusal(self, f'{{"a": {token}}}'.encode()),
                             problem("f:1", f"{token}: JSON has no NaN or Infinity"))

    def test_a_number_past_a_double_is_refused_and_the_largest_double_read(self):
        self.assertEqual(rio.parse_json_bytes(b"[1.7976931348623157e308, -1e-320]", "f:1", WHAT),
                         [1.7976931348623157e308, -1e-320])
        for text in ("1e400", "-1e400", "1.8e308"):
            self.assertEqual(refusal(self, f"[{text}]".encode()),
                             problem("f:1", f"the number {text} is too large for a double"))

    def test_a_long_number_is_named_by_its_first_21_characters_and_its_length(self):
        long_float = "1" + "0" * 400 + ".5"
        self.assertEqual(refusal(self, f'{{"a": {long_float}}}'.encode()),
                         problem("f:1", "the number " + "1" + "0" * 20 + "... (403 characters) is too large "
                                 "for a double"))
        self.assertEqual(refusal(self, b"9" * 5000),
                         problem("f:1", "the number " + "9" * 21 + "... (5000 characters) is too large "
                                 "for a double"))
        # 24 characters are shown whole.
        self.assertEqual(refusal(self, b"[1" + b"0" * 19 + b"e300]"),
                         problem("f:1", "the number 1" + "0" * 19 + "e300 is too large for a double"))

    def test_an_integer_within_64_bits_stays_exact_and_one_beyond_is_a_double(self):
        exact = {"18446744073709551615": 2 ** 64 - 1, "-9223372036854775808": -2 ** 63, "0": 0, "-1": -1,
                 "12345678901234567890": 12345678901234567890}
        for text, value in exact.items():
            parsed = rio.parse_json_bytes(f"[{text}]".encode(), "f:1", WHAT)[0]
            self.assertIs(type(parsed), int, text)
            self.assertEqual(parsed, value)
        for text in ("18446744073709551616", "-9223372036854775809", "99999999999999999999",
                     "100000000000000000000", "1" + "0" * 300):
            parsed = rio.parse_json_bytes(f"[{text}]".encode(), "f:1", WHAT)[0]
            self.assertIs(type(parsed), float, text)
            self.assertEqual(parsed, float(text))

    def test_a_key_given_twice_is_refused_with_the_object_path_and_the_first_key_repeated(self):
        self.assertEqual(refusal(self, b'{"a": 1, "a": 1}'), problem("f:1", 'duplicate key "a"', "$"))
        self.assertEqual(refusal(self, b'{"x": [0, {"a": 1, "b": 2, "b": 3, "a": 4}]}'),
                         problem("f:1", 'duplicate key "b"', "$.x[1]"))
        self.assertEqual(rio.parse_json_bytes(b'{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}', "f:1", WHAT),
                         {"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]})

    def test_a_long_key_is_named_by_its_first_57_characters(self):
        key60, key61 = "k" * 60, "k" * 61
        self.assertEqual(refusal(self, f'{{"{key60}": 1, "{key60}": 2}}'.encode()),
                         problem("f:1", f'duplicate key "{key60}"', "$"))
        self.assertEqual(refusal(self, f'{{"{key61}": 1, "{key61}": 2}}'.encode()),
                         problem("f:1", f'duplicate key "{"k" * 57}... (61 characters)"', "$"))

    def test_a_path_longer_than_80_characters_is_cut(self):
        inner = b'{"b": 1, "b": 2}'
        key78, key79 = "k" * 78, "k" * 79
        self.assertEqual(refusal(self, f'{{"{key78}": '.encode() + inner + b"}"),
                         problem("f:1", 'duplicate key "b"', "$." + key78))
        self.assertEqual(refusal(self, f'{{"{key79}": '.encode() + inner + b"}"),
                         problem("f:1", 'duplicate key "b"', "$." + "k" * 75 + "... (81 characters)"))

    def test_nul_and_half_a_surrogate_pair_are_refused_in_strings_and_keys(self):
        nul, half = "\\u0000 (NUL)", "\\ud800, half a surrogate pair (not a character)"
        self.assertEqual(refusal(self, b'{"a": ["x", "y\\u0000"]}'), problem("f:1", f"a string holds {nul}", "$.a[1]"))
        self.assertEqual(refusal(self, b'{"a": {"\\u0000": 1}}'), problem("f:1", f"a key holds {nul}", "$.a"))
        self.assertEqual(refusal(self, b'["\\ud800"]'), problem("f:1", f"a string holds {half}", "$[0]"))
        self.assertEqual(refusal(self, b'{"\\udc00x": 1}'),
                         problem("f:1", "a key holds \\udc00, half a surrogate pair (not a character)", "$"))
        self.assertEqual(rio.parse_json_bytes(b'{"\\ud83d\\ude00": "\\u0001 \\ud83d\\ude00"}', "f:1", WHAT),
                         {"\U0001F600": "\x01 \U0001F600"})

    def test_64_levels_of_nesting_are_read_and_65_refused(self):
        for open_, close in ((b"[", b"]"), (b'{"a": ', b"}")):
            fits = open_ * 64 + b"1" + close * 64
            self.assertEqual(rio.parse_json_bytes(fits, "f:1", WHAT), json.loads(fits))
            # An empty array or object is a level; the scalar inside the 64th is not.
            inner = b"[]" if open_ == b"[" else b"{}"
            deep = open_ * 64 + inner + close * 64
            path = "$" + ("[0]" if open_ == b"[" else ".a") * 64
            self.assertEqual(refusal(self, deep), problem("f:1", "nesting deeper than 64 levels",
                                                          path[:77] + f"... ({len(path)} characters)"))

    def test_nesting_too_deep_for_the_parser_is_refused_as_nesting(self):
        self.assertEqual(refusal(self, nested(100000)), problem("f:1", "nesting deeper than 64 levels"))

    def test_not_utf8_names_the_byte_its_column_and_in_a_file_of_lines_the_line(self):
        self.assertEqual(refusal(self, b'{"a": "\xff"}'), problem("f:1", "not UTF-8: byte 0xff at column 8"))
        self.assertEqual(refusal(self, b'{\n"a": 1,\n"b": "\xc3("\n}', "run.json", "the run"),
                         problem("run.json:3", "not UTF-8: byte 0xc3 at column 7", what="the run"))
        self.assertEqual(refusal(self, b'\xc3(\n', "run.json", "the run"),
                         problem("run.json:1", "not UTF-8: byte 0xc3 at column 1", what="the run"))
        # A file that opens with a newline: the bad byte first on line 2.
        self.assertEqual(refusal(self, b'\n\xff{}\n', "run.json", "the run"),
                         problem("run.json:2", "not UTF-8: byte 0xff at column 1", what="the run"))

    def test_a_syntax_error_names_its_column_and_in_a_file_of_lines_the_line(self):
        self.assertEqual(refusal(self, b'{"a": }'), problem("f:1", "Expecting value at column 7"))
        self.assertEqual(refusal(self, b'{\n"a": 1,\n}', "run.json", "the run"),
                         problem("run.json:3", "Expecting property name enclosed in double quotes at column 1",
                                 what="the run"))


def full_record():
    """A record with every section the reader checks, each field of an accepted type."""
    return {
        "case_id": "c1", "status": "ok", "role": "sweep", "workload": "engine", "label": "l", "error": None,
        "params": {"tp": 2, "layers": 4, "mem_fraction": 0.9, "batch_size": 8, "seq_len": 128,
                   "message_bytes": 1024, "quant": "none", "instrumentation": "off", "dtype": "bf16",
                   "allreduce": "nccl", "mode": "decode", "cuda_graph": True, "other": "x"},
        "plan": {"breakdown": {"weights": 10, "kv_cache": 2.5}, "max_tokens": 100, "feasible": True},
        "memory": [],
        "latency": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "mean": 1.5, "samples_us": [1, 2.5]},
        "throughput": {"tokens_per_s": 5.0, "algbw_GBps": 1.0, "busbw_GBps": 2.0},
        "checks": {"k": {"status": "pass"}},
        "baseline": {"latency.p50": {"verdict": "ok", "ratio": 1.0, "ci_low": 0.9, "ci_high": 1.1, "p_value": 0.5}},
        "provenance": {"git_sha": "abc"},
        "allreduce_ran": {"requested": "nccl", "backend": "nccl", "verdict": "as-requested", "fallback": None,
                          "ran": [{"backend": "nccl", "calls": 1, "bytes_min": 1, "bytes_max": 2}]},
    }


SAMPLES = {"null": (None, "null"), "boolean": (True, "true"), "number": (7, "7"), "string": ("s", '"s"'),
           "array": ([], "[]"), "object": ({}, "{}")}
N, S, B, O, A, Z = "number", "string", "boolean", "object", "array", "null"

# (path, the kinds it takes in the order the message names them, required, a valid string)
RECORD_FIELDS = [
    (("case_id",), (S,), True, None),
    (("status",), (S,), True, "ok"),
    (("params",), (O,), True, None),
    (("role",), (S, Z), False, None),
    (("workload",), (S, Z), False, None),
    (("label",), (S, Z), False, None),
    (("error",), (S, Z, O), False, None),
    (("plan",), (O, Z), False, None),
    (("plan", "breakdown"), (O, Z), False, None),
    (("plan", "max_tokens"), (N, Z), False, None),
    (("plan", "feasible"), (B, Z), False, None),
    (("memory",), (O, A, Z), False, None),
    (("latency",), (O, Z), False, None),
    (("latency", "samples_us"), (A, Z), False, None),
    (("throughput",), (O, Z), False, None),
    (("checks",), (O, Z), False, None),
    (("checks", "k", "status"), (S,), True, None),
    (("baseline",), (O, Z), False, None),
    (("baseline", "latency.p50", "verdict"), (S,), True, None),
    (("provenance",), (O, Z), False, None),
    (("allreduce_ran",), (O, Z), False, None),
    (("allreduce_ran", "requested"), (S,), False, None),
    (("allreduce_ran", "backend"), (S,), False, None),
    (("allreduce_ran", "verdict"), (S,), False, None),
    (("allreduce_ran", "fallback"), (S, Z), False, None),
    (("allreduce_ran", "ran"), (A,), False, None),
    (("allreduce_ran", "ran", 0, "backend"), (S,), True, None),
] + [(("params", key), (N, Z), False, None)
     for key in ("tp", "layers", "mem_fraction", "batch_size", "seq_len", "message_bytes")] \
  + [(("params", key), (S, Z), False, None) for key in ("quant", "instrumentation", "dtype", "allreduce", "mode")] \
  + [(("params", "cuda_graph"), (B, Z), False, None), (("params", "other"), (S, N, B, Z), False, None)] \
  + [(("latency", key), (N, Z), False, None) for key in ("p50", "p90", "p99", "mean")] \
  + [(("throughput", key), (N, Z), False, None) for key in ("tokens_per_s", "algbw_GBps", "busbw_GBps")] \
  + [(("baseline", "latency.p50", key), (N, Z), False, None) for key in ("ratio", "ci_low", "ci_high", "p_value")] \
  + [(("allreduce_ran", "ran", 0, key), (N,), False, None) for key in ("calls", "bytes_min", "bytes_max")]


def json_path(path):
    return "$" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)


def edited(doc, path, value=None, remove=False):
    node = doc
    for key in path[:-1]:
        node = node[key]
    if remove:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


class RecordFields(unittest.TestCase):
    def refusal(self, rec, where="r.jsonl:3"):
        with self.assertRaises(rio.ReportInputError) as caught:
            rio.validate_record(rec, where)
        return str(caught.exception)

    def test_the_full_record_is_accepted_as_it_is(self):
        rec = full_record()
        self.assertIs(rio.validate_record(rec, "r.jsonl:3"), rec)
        self.assertEqual(rec, full_record())

    def test_each_known_field_takes_its_types_and_refuses_the_others_by_path(self):
        for path, kinds, _, valid_string in RECORD_FIELDS:
            for kind, (value, shown) in SAMPLES.items():
                if kind == S and valid_string:
                    value, shown = valid_string, json.dumps(valid_string)
                rec = edited(full_record(), path, value)
                with self.subTest(path=json_path(path), kind=kind):
                    if kind in kinds:
                        rio.validate_record(rec, "r.jsonl:3")
                    else:
                        self.assertEqual(self.refusal(rec), f"r.jsonl:3: {json_path(path)}: expected "
                                         f"{' or '.join(kinds)}, got {kind} {shown}")

    def test_a_required_key_is_required_and_an_optional_one_may_be_missing(self):
        for path, _, required, _ in RECORD_FIELDS:
            rec = edited(full_record(), path, remove=True)
            with self.subTest(path=json_path(path)):
                if required:
                    self.assertEqual(self.refusal(rec), f"r.jsonl:3: {json_path(path)}: required key missing")
                else:
                    rio.validate_record(rec, "r.jsonl:3")

    def test_a_status_is_one_of_five(self):
        for status in ("ok", "infeasible", "failed", "skipped", "fallback"):
            rio.validate_record(edited(full_record(), ("status",), status), "r.jsonl:3")
        for status in ("OK", "pass", ""):
            self.assertEqual(self.refusal(edited(full_record(), ("status",), status)),
                             "r.jsonl:3: $.status: expected one of ok, infeasible, failed, skipped, fallback, "
                             f"got {json.dumps(status)}")

    def test_a_line_that_is_not_an_object_is_refused_as_such(self):
        for value, shown in (([1], "array [1]"), ("x", 'string "x"'), (None, "null null"), (2, "number 2")):
            self.assertEqual(self.refusal(value),
                             f"r.jsonl:3: $: expected a JSON object (one case per line), got {shown}")

    def test_the_terms_of_a_plan_the_samples_and_the_entries_are_numbers_and_objects(self):
        members = [(("plan", "breakdown", "weights"), "a number of bytes"),
                   (("latency", "samples_us", 1), "a number (microseconds)")]
        for path, expected in members:
            for kind, (value, shown) in SAMPLES.items():
                rec = edited(full_record(), path, value)
                with self.subTest(path=json_path(path), kind=kind):
                    if kind == N:
                        rio.validate_record(rec, "r.jsonl:3")
                    else:
                        self.assertEqual(self.refusal(rec), f"r.jsonl:3: {json_path(path)}: expected {expected}, "
                                         f"got {kind} {shown}")
        entries = [(("checks", "k"), "an object {status, detail, ...}"),
                   (("baseline", "latency.p50"), "an object {verdict, ratio, ...}"),
                   (("allreduce_ran", "ran", 0), "an object {backend, calls, bytes_min, bytes_max}")]
        for path, expected in entries:
            for kind, (value, shown) in SAMPLES.items():
                if kind == O:
                    continue
                with self.subTest(path=json_path(path), kind=kind):
                    self.assertEqual(self.refusal(edited(full_record(), path, value)),
                                     f"r.jsonl:3: {json_path(path)}: expected {expected}, got {kind} {shown}")
        # Every entry is looked at, not only the first.
        rec = full_record()
        rec["checks"]["z"] = {"status": 1}
        self.assertEqual(self.refusal(rec), "r.jsonl:3: $.checks.z.status: expected string, got number 1")
        rec = full_record()
        rec["allreduce_ran"]["ran"].append({"backend": "nccl", "calls": "2"})
        self.assertEqual(self.refusal(rec), 'r.jsonl:3: $.allreduce_ran.ran[1].calls: expected number, got string "2"')

    def test_a_value_is_shown_whole_up_to_60_characters(self):
        rec = edited(full_record(), ("label",), ["x" * 56])  # ["xxx...x"]: 60 characters
        self.assertEqual(self.refusal(rec),
                         'r.jsonl:3: $.label: expected string or null, got array ["' + "x" * 56 + '"]')
        rec = edited(full_record(), ("label",), ["x" * 57])
        self.assertEqual(self.refusal(rec), 'r.jsonl:3: $.label: expected string or null, got array ["' + "x" * 55
                         + '...')

    def test_a_boolean_is_no_number(self):
        self.assertEqual(self.refusal(edited(full_record(), ("plan", "breakdown", "weights"), False)),
                         "r.jsonl:3: $.plan.breakdown.weights: expected a number of bytes, got boolean false")
        self.assertTrue(rio.is_number(3) and rio.is_number(-2.5) and rio.is_number(0))
        for value in (True, False, float("nan"), float("inf"), float("-inf"), "3", None):
            self.assertFalse(rio.is_number(value), value)


class Folder(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tpb-reader-rules-")
        self.addCleanup(self.tmp.cleanup)

    def file(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def results(self, *lines, end=b"\n"):
        return self.file("results.jsonl", end.join(line if isinstance(line, bytes) else json.dumps(line).encode()
                                                   for line in lines) + end)

    def refusal(self, load, path):
        with self.assertRaises(rio.ReportInputError) as caught:
            load(path)
        return str(caught.exception)

    def limit(self, size):
        """JSON_MAX_BYTES set to size for one test (the rule is relative to it; 64 MiB lines are slow)."""
        saved = rio.JSON_MAX_BYTES
        rio.JSON_MAX_BYTES = size
        self.addCleanup(setattr, rio, "JSON_MAX_BYTES", saved)

    def failing_opens(self):
        """The file exists and opening it fails as an unreadable one would (root reads any)."""
        def refuse(path, mode="r"):
            raise PermissionError(13, "Permission denied", path)

        rio.open = refuse  # the module's open, before the builtin
        self.addCleanup(delattr, rio, "open")

    def endless(self):
        """An input that never ends (a line of /dev/zero): the reader asks for a bounded size."""
        class Endless:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            given = 0

            def readline(self, size):
                if size is None or size < 0:
                    raise AssertionError("an unbounded read of an endless input")
                self.given += size
                if self.given > 4 * rio.JSON_MAX_BYTES:
                    raise AssertionError("read on past the limit")
                return b" " * size

            read = readline

        saved = rio._open_input
        rio._open_input = lambda path, what: Endless()
        self.addCleanup(setattr, rio, "_open_input", saved)

    def failing_reads(self):
        """Opening an input works; reading it fails as a disk error would."""
        class Failing:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def readline(self, *_):
                raise OSError(5, "Input/output error")

            read = readline

        saved = rio._open_input
        rio._open_input = lambda path, what: Failing()
        self.addCleanup(setattr, rio, "_open_input", saved)


def record(case_id, status="ok", **extra):
    return dict({"case_id": case_id, "status": status, "params": {}}, **extra)


class ResultsFile(Folder):
    def test_records_come_in_file_order_with_their_line_numbers_blank_lines_counted(self):
        path = self.results(record("a"), b"", b"  \t", record("b", "failed"), b"\r", record("a", "skipped"))
        records = rio.load_results(path)
        self.assertEqual([(r["case_id"], r["status"], r["_line"]) for r in records],
                         [("a", "ok", 1), ("b", "failed", 4), ("a", "skipped", 6)])

    def test_a_problem_names_the_file_and_the_line_counting_blank_ones(self):
        path = self.results(record("a"), b"", b'{"case_id": "b", "status": "ok", "params": {}, "tp": NaN}')
        self.assertEqual(self.refusal(rio.load_results, path),
                         problem(f"{path}:3", "NaN: JSON has no NaN or Infinity"))
        path = self.results(record("a"), b"", record("b", "done"))
        self.assertEqual(self.refusal(rio.load_results, path),
                         f"{path}:3: $.status: expected one of ok, infeasible, failed, skipped, fallback, got \"done\"")

    def test_a_line_is_one_json_text_as_written(self):
        # A record cut short (a crash mid-write), trailing spaces kept: the column is where
        # the text ends as written; anything after the object is refused.
        path = self.results(record("a"), b'{"case_id": "b",   ')
        self.assertEqual(self.refusal(rio.load_results, path),
                         problem(f"{path}:2", "Expecting property name enclosed in double quotes at column 20"))
        for tail in (b"X", b"\rX", b" x"):
            line = json.dumps(record("b")).encode() + tail
            path = self.results(record("a"), line)
            column = len(line) - len(tail.lstrip(b" \r")) + 1
            self.assertEqual(self.refusal(rio.load_results, path),
                             problem(f"{path}:2", f"Extra data at column {column}"))

    def test_crlf_line_ends_and_a_last_line_without_one_are_read(self):
        path = self.results(record("a"), record("b"), end=b"\r\n")
        self.assertEqual([r["case_id"] for r in rio.load_results(path)], ["a", "b"])
        path = self.file("results.jsonl", json.dumps(record("a")).encode())
        self.assertEqual([r["_line"] for r in rio.load_results(path)], [1])

    def test_an_empty_file_has_no_records_and_a_missing_one_is_named(self):
        self.assertEqual(rio.load_results(self.file("results.jsonl", b"")), [])
        missing = os.path.join(self.tmp.name, "none.jsonl")
        self.assertEqual(self.refusal(rio.load_results, missing),
                         f"{missing}: no such file (expected the results.jsonl of a run)")
        self.assertEqual(self.refusal(rio.load_results, self.tmp.name),
                         f"{self.tmp.name}: no such file (expected the results.jsonl of a run)")

    def test_a_line_is_at_most_the_json_limit_its_newline_included(self):
        self.limit(2 << 20)
        base = json.dumps(record("a")).encode()
        fits = base + b" " * ((2 << 20) - len(base) - 1)  # with its newline: the limit
        path = self.results(record("x"), fits)
        self.assertEqual([r["case_id"] for r in rio.load_results(path)], ["x", "a"])
        for too_long in (fits + b" ", fits + b" " * 5000):
            path = self.results(record("x"), too_long, record("y"))
            self.assertEqual(self.refusal(rio.load_results, path),
                             f"{path}:2: longer than 2 MiB (tpbench's limit for a JSON text)")

    def test_a_read_error_is_one_line_naming_the_file(self):
        path = self.results(record("a"))
        self.failing_reads()
        self.assertEqual(self.refusal(rio.load_results, path), f"{path}: cannot read (Input/output error)")

    def test_a_file_that_cannot_be_opened_is_named_with_the_reason(self):
        path = self.results(record("a"))
        self.failing_opens()
        self.assertEqual(self.refusal(rio.load_results, path),
                         f"{path}: cannot read (Permission denied); expected the results.jsonl of a run")

    def test_an_endless_line_is_refused_at_the_limit(self):
        self.limit(1 << 20)
        path = self.results(record("a"))
        self.endless()
        self.assertEqual(self.refusal(rio.load_results, path),
                         f"{path}:1: longer than 1 MiB (tpbench's limit for a JSON text)")

    def test_an_input_that_cannot_be_opened_is_named_with_the_reason(self):
        missing = os.path.join(self.tmp.name, "gone")
        with self.assertRaises(rio.ReportInputError) as caught:
            rio._open_input(missing, "the run.json of a run")
        self.assertEqual(str(caught.exception),
                         f"{missing}: cannot read (No such file or directory); expected the run.json of a run")
        with rio._open_input(self.results(record("a")), "x") as f:
            self.assertEqual(f.read(1), b"{")  # bytes: the reader decodes UTF-8 itself


def full_run():
    return {"run_id": "r", "provenance": {"host": "h"}, "scenario": {"name": "s", "document": {"name": "s"}},
            "summary": {"checks": {"k": [{"status": "pass"}]}, "exit_code": 0},
            "cases": [{"case_id": "a"}, {"case_id": "b"}], "fixture": False}


RUN_FIELDS = [
    (("provenance",), (O, Z)), (("scenario",), (O, Z)), (("scenario", "document"), (O, Z)),
    (("summary",), (O, Z)), (("summary", "checks"), (O, Z)), (("cases",), (A, Z)),
    (("cases", 1, "case_id"), (S,)), (("fixture",), (B, Z)),
]


class RunFile(Folder):
    def run_json(self, doc):
        return self.file("run.json", json.dumps(doc, indent=1).encode())

    def test_a_missing_run_json_is_no_run_and_a_full_one_is_read(self):
        self.assertEqual(rio.load_run(os.path.join(self.tmp.name, "run.json")), {})
        self.assertEqual(rio.load_run(self.run_json(full_run())), full_run())

    def test_each_known_field_takes_its_types_and_refuses_the_others_by_path(self):
        for path, kinds in RUN_FIELDS:
            for kind, (value, shown) in SAMPLES.items():
                file = self.run_json(edited(full_run(), path, value))
                with self.subTest(path=json_path(path), kind=kind):
                    if kind in kinds:
                        rio.load_run(file)
                    else:
                        self.assertEqual(self.refusal(rio.load_run, file), f"{file}: {json_path(path)}: expected "
                                         f"{' or '.join(kinds)}, got {kind} {shown}")
        for path, _ in RUN_FIELDS:
            rio.load_run(self.run_json(edited(full_run(), path, remove=True)))

    def test_check_groups_are_arrays_and_cases_objects(self):
        for path, expected in ((("summary", "checks", "k"), "an array of group results"),
                               (("cases", 1), "an object {case_id, ...}")):
            for kind, (value, shown) in SAMPLES.items():
                file = self.run_json(edited(full_run(), path, value))
                with self.subTest(path=json_path(path), kind=kind):
                    if kind == (A if path[0] == "summary" else O):
                        rio.load_run(file)
                    else:
                        self.assertEqual(self.refusal(rio.load_run, file),
                                         f"{file}: {json_path(path)}: expected {expected}, got {kind} {shown}")

    def test_run_json_is_one_object(self):
        for doc, shown in (([], "array"), ("x", "string"), (None, "null")):
            file = self.run_json(doc)
            self.assertEqual(self.refusal(rio.load_run, file), f"{file}: $: expected an object, got {shown}")

    def test_run_json_is_strict_json_with_its_line(self):
        file = self.file("run.json", b'{\n "a": 1,\n "a": 2\n}')
        self.assertEqual(self.refusal(rio.load_run, file),
                         problem(file, 'duplicate key "a"', "$", what="the run.json of a run"))
        file = self.file("run.json", b'{\n "a": 1,\n "b": NaN\n}')
        self.assertEqual(self.refusal(rio.load_run, file),
                         problem(file, "NaN: JSON has no NaN or Infinity", what="the run.json of a run"))

    def test_run_json_is_at_most_the_json_limit(self):
        self.limit(1 << 20)
        text = json.dumps(full_run()).encode()
        self.assertEqual(rio.load_run(self.file("run.json", text + b" " * ((1 << 20) - len(text)))), full_run())
        for extra in (1, 5000):
            file = self.file("run.json", text + b" " * ((1 << 20) - len(text) + extra))
            self.assertEqual(self.refusal(rio.load_run, file),
                             f"{file}: larger than 1 MiB (tpbench's limit for a JSON text)")

    def test_a_read_error_is_one_line_naming_the_file(self):
        file = self.run_json(full_run())
        self.failing_reads()
        self.assertEqual(self.refusal(rio.load_run, file), f"{file}: cannot read (Input/output error)")

    def test_a_file_that_cannot_be_opened_is_named_with_the_reason(self):
        file = self.run_json(full_run())
        self.failing_opens()
        self.assertEqual(self.refusal(rio.load_run, file),
                         f"{file}: cannot read (Permission denied); expected the run.json of a run")

    def test_an_endless_file_is_refused_at_the_limit(self):
        self.limit(1 << 20)
        file = self.run_json(full_run())
        self.endless()
        self.assertEqual(self.refusal(rio.load_run, file),
                         f"{file}: larger than 1 MiB (tpbench's limit for a JSON text)")


class LastRecordCounts(unittest.TestCase):
    def test_the_last_record_of_each_case_counts_in_file_order(self):
        records = [record("a", "failed", _line=1), record("b", "ok", _line=2), record("a", "ok", _line=3),
                   record("c", "skipped", _line=4), record("b", "failed", _line=5)]
        kept = rio.latest_per_case(records)
        self.assertEqual([(r["case_id"], r["status"], r["_line"]) for r in kept],
                         [("a", "ok", 3), ("c", "skipped", 4), ("b", "failed", 5)])
        self.assertEqual(rio.latest_per_case([]), [])
        once = [record("a", _line=1), record("b", _line=2)]
        self.assertEqual(rio.latest_per_case(once), once)


if __name__ == "__main__":
    unittest.main()
