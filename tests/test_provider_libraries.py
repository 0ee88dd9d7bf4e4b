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


def elf_with_needs(path, needed, runpath=None, rpath=None, base=0x1000, wide=True, order="<"):
    """A minimal ELF shared object (64 or 32 bits, little or big endian): one loadable segment and a dynamic
    section naming ``needed`` (DT_NEEDED), ``runpath`` (DT_RUNPATH) and ``rpath`` (DT_RPATH); the string table
    is addressed virtually, as in real files, so the reader must map it through the segment."""
    names = b"\x00"
    offsets = {}
    for name in (*needed, *(p for p in (runpath, rpath) if p)):
        offsets[name] = len(names)
        names += name.encode() + b"\x00"
    word, header_size, ph_size = ("Q", 64, 56) if wide else ("I", 52, 32)
    strtab = header_size + 2 * ph_size
    entry = 2 * struct.calcsize(word)
    dynamic = (strtab + len(names) + 7) // 8 * 8
    entries = [(1, offsets[n]) for n in needed] + ([(29, offsets[runpath])] if runpath else [])
    entries += ([(15, offsets[rpath])] if rpath else []) + [(5, base + strtab), (0, 0)]
    size = dynamic + entry * len(entries)
    header = b"\x7fELF" + bytes([2 if wide else 1, 1 if order == "<" else 2, 1]) + bytes(9)
    if wide:
        header += struct.pack(order + "HHIQQQIHHHHHH", 3, 62, 1, 0, header_size, 0, 0, header_size, ph_size, 2, 64,
                              0, 0)
        load = struct.pack(order + "IIQQQQQQ", 1, 5, 0, base, base, size, size, 0x1000)
        dyn = struct.pack(order + "IIQQQQQQ", 2, 6, dynamic, base + dynamic, base + dynamic, entry * len(entries),
                          entry * len(entries), 8)
    else:
        header += struct.pack(order + "HHIIIIIHHHHHH", 3, 40, 1, 0, header_size, 0, 0, header_size, ph_size, 2, 40,
                              0, 0)
        load = struct.pack(order + "IIIIIIII", 1, 0, base, base, size, size, 5, 0x1000)
        dyn = struct.pack(order + "IIIIIIII", 2, dynamic, base + dynamic, base + dynamic, entry * len(entries),
                          entry * len(entries), 6, 4)
    body = header + load + dyn + names
    body += bytes(dynamic - len(body)) + b"".join(struct.pack(order + word * 2, t, v) for t, v in entries)
    path.write_bytes(body)
    return path


@pytest.mark.parametrize("wide, order", [(True, "<"), (False, "<"), (True, ">"), (False, ">")])
def test_the_dynamic_section_is_read_through_the_segments_with_origin_expanded(tmp_path, wide, order):
    lib = elf_with_needs(tmp_path / "libprovider.so", ["libc.so.6", ABSENT], runpath="$ORIGIN/deps:/opt/x",
                         wide=wide, order=order)
    section = dynamic_section(lib)
    assert section.needed == ("libc.so.6", ABSENT)
    assert section.search == (str(tmp_path.resolve() / "deps"), "/opt/x")


def test_runpath_hides_rpath_as_in_glibc(tmp_path):
    both = elf_with_needs(tmp_path / "libboth.so", [ABSENT], runpath="/opt/run", rpath="/opt/r")
    assert dynamic_section(both).search == ("/opt/run",)
    only = elf_with_needs(tmp_path / "libold.so", [ABSENT], rpath="/opt/r")
    assert dynamic_section(only).search == ("/opt/r",)


def test_origin_is_the_folder_the_library_was_reached_by_not_only_where_it_lives(tmp_path):
    """uv's symlink link mode, Nix, Bazel: the library file is a link into a store; glibc expands $ORIGIN to the
    folder of the path it opened, without following the link."""
    real = tmp_path / "store" / "pkg" / "lib"
    real.mkdir(parents=True)
    elf_with_needs(real / "libprovider.so", [ABSENT], runpath="$ORIGIN/../deps")
    for folder in ("lib", "deps"):
        (tmp_path / "env" / folder).mkdir(parents=True)
    (tmp_path / "env" / "deps" / ABSENT).write_bytes(b"")
    (tmp_path / "env" / "lib" / "libprovider.so").symlink_to(real / "libprovider.so")
    assert unresolved_needs(tmp_path / "env" / "lib" / "libprovider.so") == []
    assert unresolved_needs(real / "libprovider.so") == [ABSENT]


def test_a_truncated_elf_is_a_value_error_not_a_struct_error(tmp_path):
    lib = elf_with_needs(tmp_path / "libfull.so", [ABSENT])
    for size in (56, 64 + 30, 130):  # inside the header, the program headers, the dynamic section
        cut = tmp_path / f"libcut{size}.so"
        cut.write_bytes(lib.read_bytes()[:size])
        with pytest.raises(ValueError):
            dynamic_section(cut)


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
    # the fix, followed: a process started with the folder on LD_LIBRARY_PATH finds it (the loader reads the
    # variable at start; setting it later in this process would change nothing, and neither does the check)
    folder = tmp_path / "trt"
    folder.mkdir()
    (folder / ABSENT).write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(folder))
    assert ort_executor._provider_libraries_problem("TensorRT") is not None
    code = ("from edgeaccel.hardware.libraries import unresolved_needs; import sys; "
            "print(unresolved_needs(sys.argv[1]))")
    child = subprocess.run([sys.executable, "-c", code, str(capi / "libonnxruntime_providers_tensorrt.so")],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "[]"
