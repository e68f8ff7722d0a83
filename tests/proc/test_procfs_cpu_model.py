"""procfs.cpu_model: the model name from /proc/cpuinfo's text (platform.processor() is empty on
Linux, so traces read "CPU x86_64 (unknown)")."""

from solbench.proc.procfs import cpu_model

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model\t\t: 143
model name\t: Intel(R) Xeon(R)  Platinum 8480+
flags\t\t: fpu vme

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
"""
ARM = """processor\t: 0
BogoMIPS\t: 50.00
CPU part\t: 0xd0c

Model\t\t: Raspberry Pi 4 Model B Rev 1.4
"""


def test_model_name_of_x86_and_arm_cpuinfo():
    assert cpu_model(X86) == "Intel(R) Xeon(R) Platinum 8480+"  # blanks folded, first CPU's
    assert cpu_model(ARM) == "Raspberry Pi 4 Model B Rev 1.4"  # the "model" field is not "Model"
    assert cpu_model("processor\t: 0\nmodel name\t:\n") is None
    assert cpu_model("") is None

