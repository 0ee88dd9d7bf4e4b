"""Reading what a shared library needs (its ELF dynamic section) and whether the loader would find it: how
ONNX Runtime's GPU providers are judged loadable before a session asks for them (a GPU build lists its CUDA
and TensorRT providers whether or not their libraries are here)."""

import shutil
import struct
import subprocess
import sys

import pytest

from edgeaccel.hardware.libraries import dynamic_section, unresolved_needs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF and the glibc loader: Linux only")

ABSENT = "libedgeaccel_absent_for_tests.so.7"


def elf_with_needs(path, needed, runpath=None, base=0x1000):
    """A minimal 64-bit little-endian ELF shared object: one loadable segment and a dynamic section naming
    ``needed`` (DT_NEEDED) and ``runpath`` (DT_RUNPATH); the string table is addressed virtually, as in
    real files, so the reader must map it through the segment."""
    names = b"\x00"
    offsets = {}
    for name in (*needed, *([runpath] if runpath else [])):
        offsets[name] = len(names)
        names += name.encode() + b"\x00"
    strtab = 64 + 2 * 56
    dynamic = (strtab + len(names) + 7) // 8 * 8
    entries = [(1, offsets[n]) for n in needed] + ([(29, offsets[runpath])] if runpath else [])
    entries += [(5, base + strtab), (0, 0)]
    size = dynamic + 16 * len(entries)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, size, size, 0x1000)
    dyn = struct.pack("<IIQQQQQQ", 2, 6, dynamic, base + dynamic, base + dynamic, 16 * len(entries),
                      16 * len(entries), 8)
    body = header + load + dyn + names
    body += bytes(dynamic - len(body)) + b"".join(struct.pack("<QQ", tag, value) for tag, value in entries)
    path.write_bytes(body)
    return path


def test_the_dynamic_section_is_read_through_the_segments_with_origin_expanded(tmp_path):
    lib = elf_with_needs(tmp_path / "libprovider.so", ["libc.so.6", ABSENT], runpath="$ORIGIN/deps:/opt/x")
    section = dynamic_section(lib)
    assert section.needed == ("libc.so.6", ABSENT)
    assert section.search == (str(tmp_path.resolve() / "deps"), "/opt/x")


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils' readelf is not installed")
def test_needed_libraries_of_a_real_extension_match_readelf():
    import _ctypes

    out = subprocess.run(["readelf", "-d", _ctypes.__file__], capture_output=True, text=True, check=True).stdout
    expected = tuple(line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line)
    assert expected and dynamic_section(_ctypes.__file__).needed == expected


def test_a_file_that_is_not_elf_is_a_value_error(tmp_path):
    (tmp_path / "x.so").write_bytes(b"MZ not a shared object")
    with pytest.raises(ValueError, match="not an ELF file"):
        dynamic_section(tmp_path / "x.so")


def test_unresolved_needs_are_those_no_folder_of_the_loader_holds(tmp_path):
    lib = elf_with_needs(tmp_path / "libprovider.so", ["libc.so.6", ABSENT], runpath="$ORIGIN/deps")
    assert unresolved_needs(lib) == [ABSENT]  # libc is in the loader cache
    (tmp_path / "deps").mkdir()
    (tmp_path / "deps" / ABSENT).write_bytes(b"")
    assert unresolved_needs(lib) == []  # found through the library's own RUNPATH


def test_a_gpu_build_whose_tensorrt_libraries_are_missing_is_not_offered(tmp_path, monkeypatch):
    """What a machine with onnxruntime-gpu and no TensorRT saw: the build lists TensorrtExecutionProvider, the
    session fell back with ORT's banner on stdout. The provider library's needs are checked first."""
    from edgeaccel.executors import onnxruntime as ort_executor

    capi = tmp_path / "onnxruntime" / "capi"
    capi.mkdir(parents=True)
    (tmp_path / "onnxruntime" / "__init__.py").write_text("")
    elf_with_needs(capi / "libonnxruntime_providers_tensorrt.so", ["libc.so.6", ABSENT])
    elf_with_needs(capi / "libonnxruntime_providers_cuda.so", ["libc.so.6"])

    class Build:  # where the GPU build's files are, and the providers it lists (it lists TensorRT regardless)
        __file__ = str(tmp_path / "onnxruntime" / "__init__.py")

        @staticmethod
        def get_available_providers():
            return ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]

    monkeypatch.setattr(ort_executor, "_ort", lambda: Build)
    assert ort_executor._provider_libraries_problem("CUDA") is None
    survey = ort_executor.OnnxRuntimeExecutor.survey()  # what `edgeaccel probe` prints
    assert survey.reaches == ("CUDA", "CPU") and f"needs {ABSENT}" in survey.reason
    why, fix = ort_executor._provider_libraries_problem("TensorRT")
    assert why.startswith("TensorrtExecutionProvider cannot load here: libonnxruntime_providers_tensorrt.so "
                          f"needs {ABSENT}")
    assert "LD_LIBRARY_PATH" in fix and "TensorRT" in fix
    folder = tmp_path / "trt"
    folder.mkdir()
    (folder / ABSENT).write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(folder))
    assert ort_executor._provider_libraries_problem("TensorRT") is None  # the fix, followed, works
