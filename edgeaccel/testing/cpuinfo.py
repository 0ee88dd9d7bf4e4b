"""/proc/cpuinfo as the kernel prints it (arch/x86/kernel/cpu/proc.c, arch/arm64/kernel/cpuinfo.c), and the
whole flag and hwcap lines of the CPUs the board fixtures describe (re-exported by ``edgeaccel.testing``)."""

from __future__ import annotations

from collections.abc import Sequence

def x86_cpuinfo(vendor: str, model_name: str, flags: str, logical: int, cores: int) -> str:
    """arch/x86/kernel/cpu/proc.c: one block per logical CPU, ``flags`` and ``model name`` in each."""
    blocks = []
    for cpu in range(logical):
        blocks.append(
            f"processor\t: {cpu}\nvendor_id\t: {vendor}\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: {model_name}\n"
            f"stepping\t: 8\ncpu MHz\t\t: 2000.000\nphysical id\t: 0\nsiblings\t: {logical}\n"
            f"core id\t\t: {cpu % cores}\n"
            f"cpu cores\t: {cores}\nfpu\t\t: yes\nflags\t\t: {flags}\nbogomips\t: 4000.00\n")
    return "\n".join(blocks) + "\n"


def arm64_cpuinfo(features: str, cores: Sequence[tuple[int, int, int, int]], trailer: str = "") -> str:
    """arch/arm64/kernel/cpuinfo.c: per CPU "Features" and implementer/variant/part/revision, no model
    name; ``cores`` holds (implementer, variant, part, revision) per CPU. The Raspberry Pi kernel appends
    a block with Revision, Serial and Model."""
    blocks = []
    for cpu, (implementer, variant, part, revision) in enumerate(cores):
        blocks.append(
            f"processor\t: {cpu}\nBogoMIPS\t: 108.00\nFeatures\t: {features}\nCPU implementer\t: {implementer:#04x}\n"
            f"CPU architecture: 8\nCPU variant\t: {variant:#x}\nCPU part\t: {part:#05x}\nCPU revision\t: {revision}\n")
    return "\n".join(blocks) + ("\n" + trailer if trailer else "") + "\n"


# Whole flag lines as these CPUs print them (not trimmed to the features the probe looks at, so that a
# parser meets the real noise around them).
SAPPHIRE_RAPIDS_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss "
    "ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology "
    "nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma "
    "cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm "
    "abm 3dnowprefetch cpuid_fault epb cat_l3 cat_l2 cdp_l3 intel_ppin cdp_l2 ssbd mba ibrs ibpb stibp "
    "ibrs_enhanced fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a avx512f avx512dq rdseed adx smap "
    "avx512ifma clflushopt clwb intel_pt avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves "
    "cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local split_lock_detect avx_vnni avx512_bf16 wbnoinvd dtherm ida "
    "arat pln pts hfi avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni "
    "avx512_bitalg tme avx512_vpopcntdq la57 rdpid bus_lock_detect cldemote movdiri movdir64b enqcmd fsrm md_clear "
    "serialize tsxldtrk pconfig arch_lbr ibt amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d arch_capabilities")
METEOR_LAKE_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss "
    "ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology "
    "nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma "
    "cx16 xtpr pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm "
    "3dnowprefetch cpuid_fault epb intel_ppin ssbd ibrs ibpb stibp ibrs_enhanced fsgsbase tsc_adjust bmi1 avx2 smep "
    "bmi2 erms invpcid rdt_a rdseed adx smap clflushopt clwb intel_pt sha_ni xsaveopt xsavec xgetbv1 xsaves "
    "split_lock_detect user_shstk avx_vnni dtherm ida arat pln pts hwp hwp_notify hwp_act_window hwp_epp hwp_pkg_req "
    "hfi vnmi umip pku ospke waitpkg gfni vaes vpclmulqdq tme rdpid bus_lock_detect movdiri movdir64b fsrm md_clear "
    "serialize pconfig arch_lbr ibt flush_l1d arch_capabilities")
EPYC_MILAN_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx "
    "mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid tsc_known_freq pni "
    "pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm "
    "cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext ssbd ibrs ibpb stibp vmmcall fsgsbase "
    "tsc_adjust bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 "
    "clzero xsaveerptr arat npt nrip_save umip vaes vpclmulqdq rdpid fsrm")
# arm64 hwcaps as named in arch/arm64/kernel/cpuinfo.c
CORTEX_A76_FEATURES = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop "
                       "asimddp")
CORTEX_A78AE_FEATURES = CORTEX_A76_FEATURES + " uscat ilrcpc flagm paca pacg"
CORTEX_A53_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid"
