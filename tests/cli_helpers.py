"""What the command-line tests share: running ``perfgate`` in-process and reading its one error
line (not a test module: no ``test_`` prefix)."""

from __future__ import annotations

import io


def perfgate(*args: str) -> tuple[int, str, str]:
    """Run the command line in-process: (exit status, stdout, stderr)."""
    from perfgate.cli import main

    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def error_line(err: str, command: str) -> str:
    """The one error line of ``err``; anything else there is a "reading ..." progress line."""
    lines = err.splitlines()
    errors = [line for line in lines if line.startswith(f"perfgate {command}: error: ")]
    assert len(errors) == 1, err
    assert all(line in errors or line.startswith("reading ") for line in lines), err
    assert "Traceback" not in err
    return errors[0]
