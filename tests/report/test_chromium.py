#!/usr/bin/env python3
"""report.html in a real browser: headless Chromium (Debian's `chromium` package) renders
the fixture's report without a console message, screenshots it, and the DOM it builds has
no element made from a planted "<script>" label.

Exit 77 (ctest SKIP_RETURN_CODE) when no Chromium is installed. The detector is proven
first on a page with a deliberate console error, so a Chromium that stops printing console
messages fails this test instead of passing it silently.

The screenshot is kept in $TPB_REPORT_SCREENSHOT_DIR (default: <tmp>/tpbench-report-screenshot).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_test_util as util  # noqa: E402

SKIP = 77
WIDTH, HEIGHT = 1400, 3000
PLANTED = '<script>document.title="PWNED";console.error("planted script ran")</script>'


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium(binary, url, *args):
    """Runs headless Chromium on url; returns (exit status, stdout, console lines)."""
    profile = tempfile.mkdtemp(prefix="tpb-chromium-")
    try:
        cmd = [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
               "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
               "--enable-logging=stderr", "--v=0", *args, url]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    # Console messages are logged as "...:INFO:CONSOLE(line)] "text", source: ..." (or
    # CONSOLE:line); uncaught exceptions come through the same channel.
    console = [line for line in proc.stderr.splitlines()
               if re.search(r":CONSOLE[:(]", line) or "Uncaught" in line]
    return proc.returncode, proc.stdout, console, proc.stderr


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    binary = find_chromium()
    if not binary:
        print("SKIP: no chromium on PATH (apt-get install chromium)")
        return SKIP
    tmp = util.fixture_copy()
    try:
        # The detector sees a console error when there is one.
        probe = os.path.join(tmp.name, "probe.html")
        with open(probe, "w") as f:
            f.write('<!DOCTYPE html><html><body><script>console.error("probe-error");'
                    "undefined_function();</script></body></html>")
        rc, _, console, stderr = chromium(binary, "file://" + probe, "--dump-dom")
        if rc != 0 or not any("probe-error" in line for line in console):
            fail(f"console messages not captured from Chromium (rc {rc}):\n{stderr[-2000:]}")

        records = util.read_records(tmp.name)
        for rec in records[:5]:
            rec["label"] = PLANTED
        util.write_records(tmp.name, records)
        proc = util.run_report(tmp.name)
        if proc.returncode != 0:
            fail(f"make_report.py exit {proc.returncode}: {proc.stderr}")
        url = "file://" + os.path.join(tmp.name, "report.html")

        out_dir = os.environ.get("TPB_REPORT_SCREENSHOT_DIR") or os.path.join(
            tempfile.gettempdir(), "tpbench-report-screenshot")
        os.makedirs(out_dir, exist_ok=True)
        shot = os.path.join(out_dir, "report.png")
        if os.path.exists(shot):
            os.remove(shot)
        rc, _, console, stderr = chromium(binary, url, f"--screenshot={shot}",
                                          f"--window-size={WIDTH},{HEIGHT}",
                                          "--hide-scrollbars")
        if rc != 0:
            fail(f"chromium --screenshot exit {rc}:\n{stderr[-2000:]}")
        if console:
            fail("console messages while rendering report.html:\n" + "\n".join(console))
        if not os.path.isfile(shot):
            fail("no screenshot written")
        if util.png_size(shot) != (WIDTH, HEIGHT):
            fail(f"screenshot is {util.png_size(shot)}, expected {(WIDTH, HEIGHT)}")
        if os.path.getsize(shot) < 50_000:
            fail("screenshot is nearly empty (page did not render)")

        rc, dom, console, stderr = chromium(binary, url, "--dump-dom")
        if rc != 0 or console:
            fail(f"--dump-dom exit {rc}, console: {console}")
        if re.search(r"(?i)<script", dom):
            fail("the rendered DOM has a <script> element")
        title = re.search(r"<title>(.*?)</title>", dom, re.S)
        if not title or "PWNED" in title.group(1):
            fail(f"page title changed by a planted script: {title and title.group(1)}")
        if dom.count("&lt;script&gt;document.title") < 1:
            fail("the planted label is not shown as text")
        images = re.findall(r'<img class="plot"[^>]*src="data:image/png;base64,', dom)
        if len(images) != len(util.PNG_NAMES):
            fail(f"{len(images)} plots in the DOM, expected {len(util.PNG_NAMES)}")
        print(json.dumps({"screenshot": shot, "chromium": binary}))
        return 0
    finally:
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
