"""Writing the report's files: each one whole or not at all, and a failure one clear line.

A file is written under a temporary name in its own folder, then renamed over the old one, so
a full or read-only disk, or an interrupt, leaves the earlier file (or none), never a cut one,
and no temporary file behind. A write the system refuses is a ReportOutputError naming the
file and the reason; `tpbench report` prints it as one line and exits 1, as tpbench's C++
does for a failure that is not the input's fault.
"""

import os


class ReportOutputError(Exception):
    """A report file could not be written (a full or read-only disk, no permission)."""


def _reason(err):
    return err.strerror or str(err)


def _remove_quietly(path):
    try:
        os.remove(path)
    except OSError:
        pass


def write_atomically(path, write):
    """Calls write(temporary_path), which writes the whole file there, then renames it to
    path. Raises ReportOutputError when the system refuses either step."""
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.tmp-{os.getpid()}")
    try:
        write(temporary)
        os.replace(temporary, path)
    except OSError as err:
        _remove_quietly(temporary)
        raise ReportOutputError(f"cannot write {path} ({_reason(err)})") from None
    except BaseException:
        _remove_quietly(temporary)
        raise


def write_text(path, text):
    def write(temporary):
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
    write_atomically(path, write)


def make_folder(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise ReportOutputError(f"cannot create the folder {path} ({_reason(err)})") from None


def remove(path):
    """Removes a file of an earlier report; a missing one is fine."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        raise ReportOutputError(f"cannot remove the stale {path} ({_reason(err)})") from None
