"""``host/regs.py`` (``specmem regs``): the C header compiles with gcc and its offsets, masks and
resets equal the description; the SystemRDL compiles with systemrdl-compiler into the same map;
the IP-XACT XML names the same registers and fields; ``docs/registers.md`` is the generator's
output; the command writes four files and reports bad input on one line."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from specmem.regs import c_header, compile_systemrdl, doc_map, ipxact, markdown, systemrdl
from specmem.rtl.csr import core_register_map, register_map

REPO = Path(__file__).resolve().parents[2]


def _maps():
    return [doc_map(), core_register_map("vla", 32, 4, "legacy-wide"),
            register_map("deltanet", 16, 2, "legacy-int16", heads=3, status=(("busy", 1, "b"), ("x", 5, "x")),
                         orth_policies=("evict", "skip"))]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
@pytest.mark.parametrize("idx", range(3))
def test_c_header_compiles_and_matches(tmp_path, idx):
    rm = _maps()[idx]
    (tmp_path / "specmem_csr.h").write_text(c_header(rm))
    # the program prints every macro the description implies, in the description's order
    lines = []
    for r in rm.registers:
        P = f"SPECMEM_CSR_{r.name}"
        lines.append(f'printf("{r.name} %u %u\\n", (unsigned){P}_OFFSET, (unsigned){P}_RESET);')
        for f in r.fields:
            F = f"{P}_{f.name.upper()}"
            lines.append(f'printf("{r.name}.{f.name} %u %u %u %u\\n", (unsigned){F}_SHIFT, (unsigned){F}_MASK, '
                         f'(unsigned){F}_WIDTH, (unsigned){F}_RESET);')
            for n, v in f.enum:
                lines.append(f'printf("{r.name}.{f.name}={n} %u\\n", (unsigned){F}_{n.replace("-", "_").upper()});')
    main = ("#include <stdio.h>\n#include \"specmem_csr.h\"\n"
            "_Static_assert(SPECMEM_CSR_ID_OFFSET == 0u && SPECMEM_CSR_ID_RESET == 0x534D454Du, \"ID\");\n"
            "_Static_assert(SPECMEM_CSR_TOKENS_OFFSET == 0x40u && SPECMEM_CSR_CTRL_OFFSET == 0x10u, \"offsets\");\n"
            "_Static_assert(SPECMEM_CSR_FIELD_GET(SPECMEM_CSR_PARAMS_DK_K, 0x00080040u) == 8u, \"get\");\n"
            "_Static_assert(SPECMEM_CSR_FIELD_SET(SPECMEM_CSR_CTRL_CLEAR_COUNTERS, 0u, 1u) == 2u, \"set\");\n"
            "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    (tmp_path / "main.c").write_text(main)
    exe = tmp_path / "main"
    cc = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-o", str(exe),
                         str(tmp_path / "main.c")], capture_output=True, text=True, cwd=tmp_path)
    assert cc.returncode == 0, cc.stderr
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    want = []
    for r in rm.registers:
        want.append(f"{r.name} {r.offset} {r.reset}")
        for f in r.fields:
            want.append(f"{r.name}.{f.name} {f.lsb} {f.mask} {f.width} {f.reset_value}")
            want += [f"{r.name}.{f.name}={n} {v}" for n, v in f.enum]
    assert got == want


@pytest.mark.parametrize("idx", range(3))
def test_systemrdl_compiles_to_the_same_map(idx):
    rm = _maps()[idx]
    top = compile_systemrdl(systemrdl(rm))
    regs = list(top.registers())
    assert [r.inst_name for r in regs] == [r.name for r in rm.registers]
    for node, r in zip(regs, rm.registers):
        assert node.absolute_address == r.offset
        fields = sorted(node.fields(), key=lambda f: f.lsb)
        assert [(f.inst_name, f.lsb, f.width, f.get_property("reset")) for f in fields] == \
            [(f.name, f.lsb, f.width, f.reset_value) for f in sorted(r.fields, key=lambda f: f.lsb)]
        for fn, f in zip(fields, sorted(r.fields, key=lambda f: f.lsb)):
            assert fn.is_sw_readable == f.readable and fn.is_sw_writable == f.writable
            assert bool(fn.get_property("singlepulse")) == (f.access == "pulse")


def test_systemrdl_hand_checked():
    rdl = systemrdl(doc_map())
    assert "} ID @ 0x0;" in rdl and "} TOKENS @ 0x40;" in rdl and "} CTRL @ 0x10;" in rdl
    assert "field { sw = w; hw = r; singlepulse;" in rdl
    with pytest.raises(ValueError, match="does not compile"):
        compile_systemrdl(rdl.replace("} ID @ 0x0;", "} ID @ 0x1;"))  # unaligned: rejected


def test_ipxact_names_every_register():
    rm = doc_map()
    ns = {"ipxact": "http://www.accellera.org/XMLSchema/IPXACT/1685-2014"}
    root = ET.fromstring(ipxact(rm))
    assert root.find("ipxact:name", ns).text == "specmem_csr"
    regs = root.findall(".//ipxact:register", ns)
    got = [(r.find("ipxact:name", ns).text, int(r.find("ipxact:addressOffset", ns).text.replace("'h", ""), 16))
           for r in regs]
    assert got == [(r.name, r.offset) for r in rm.registers]
    ctrl = next(r for r in regs if r.find("ipxact:name", ns).text == "CTRL")
    access = {f.find("ipxact:name", ns).text: f.find("ipxact:access", ns).text for f in ctrl.findall("ipxact:field", ns)}
    assert access == {"soft_reset": "write-only", "clear_counters": "write-only"}


def test_docs_registers_md_is_generated():
    doc = REPO / "docs" / "registers.md"
    assert doc.read_text() == markdown(doc_map()), \
        "docs/registers.md is stale: regenerate with `specmem regs --out DIR` and copy DIR/registers.md"


def test_cli_writes_four_files(tmp_path, capsys):
    from specmem.cli import main

    assert main(["regs", "--algo", "vla", "--d", "32", "--k", "4", "--out", str(tmp_path / "r")]) == 0
    names = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert names == ["registers.md", "specmem_csr.h", "specmem_csr.rdl", "specmem_csr.xml"]
    assert "#define SPECMEM_CSR_PARAMS_DK_RESET 0x00040020u" in (tmp_path / "r" / "specmem_csr.h").read_text()
    assert "specmem regs: " in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    (["--d", "0"], "d: must be an integer in 1..65535"),
    (["--format", "int4"], "format: one of legacy-int8"),
    (["--algo", "vla", "--format", "int18"], "format: the vla RTL with a register block implements legacy-int8"),
    (["--algo", "engine"], "algo: one of annihilation"),
])
def test_cli_bad_input_one_line(tmp_path, capsys, argv, msg):
    from specmem.cli import main

    assert main(["regs", *argv, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"specmem: error: {msg}")
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
