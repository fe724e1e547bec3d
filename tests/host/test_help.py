"""Help that explains itself: every option of every command has help text, and the help states
the default wherever there is one."""

import argparse
import re

import pytest

from specmem.cli import build_parser


def _commands():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("cmd", sorted(_commands()))
def test_every_option_has_help_with_its_default(cmd):
    parser = _commands()[cmd]
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        name = action.option_strings[0] if action.option_strings else action.dest
        assert action.help and action.help.strip(), f"specmem {cmd} {name}: no help text"
        shown = formatter._expand_help(action)  # the option's help as --help prints it
        if action.option_strings and action.default is not None and action.default is not False and not action.required:
            assert re.search(r"\bdefault\b", shown), f"specmem {cmd} {name}: help does not state the default: {shown!r}"


def test_one_error_prefix_for_argparse_errors(capsys):
    from specmem.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["rtl", "--algo", "vla"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert err[0].startswith("specmem: error: the following arguments are required: --d, --k, --out")
