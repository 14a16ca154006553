#!/usr/bin/python3
"""Runs a command under an OCI seccomp profile (the JSON a container runtime loads for
`seccompProfile: Localhost`), compiled here to a classic-BPF filter for x86_64, so the tests can show the
collector really works under deploy/kubernetes/seccomp/keplershm-collect.json.

usage: seccomp_exec.py PROFILE.json [--without SYSCALL]... -- COMMAND [ARG]...

Supports what the profile uses: names with SCMP_ACT_ALLOW or SCMP_ACT_ERRNO (errnoRet), and
SCMP_CMP_MASKED_EQ on a 32-bit argument mask (OCI: value = mask, valueTwo = datum)."""
import ctypes
import json
import os
import re
import sys

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
LD_W_ABS, JEQ_K, JGE_K, AND_K, RET_K = 0x20, 0x15, 0x35, 0x54, 0x06
OFFSET_NR, OFFSET_ARCH, OFFSET_ARGS = 0, 4, 16
PR_SET_NO_NEW_PRIVS, SYS_SECCOMP, SECCOMP_SET_MODE_FILTER = 38, 317, 1


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def syscall_numbers():
    with open("/usr/include/x86_64-linux-gnu/asm/unistd_64.h") as f:
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"#define __NR_(\w+) (\d+)", f.read())}


def action(rule, default_errno):
    if rule["action"] == "SCMP_ACT_ALLOW":
        return RET_ALLOW
    if rule["action"] == "SCMP_ACT_ERRNO":
        return RET_ERRNO | rule.get("errnoRet", default_errno)
    raise ValueError(f"unsupported action {rule['action']}")


def compile_profile(profile, without):
    numbers = syscall_numbers()
    default_errno = profile.get("defaultErrnoRet", 1)
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    deny = RET_ERRNO | default_errno
    code = [(LD_W_ABS, 0, 0, OFFSET_ARCH), (JEQ_K, 1, 0, AUDIT_ARCH_X86_64), (RET_K, 0, 0, RET_KILL_PROCESS),
            (LD_W_ABS, 0, 0, OFFSET_NR), (JGE_K, 0, 1, X32_SYSCALL_BIT), (RET_K, 0, 0, deny)]
    with_args = []
    for rule in profile["syscalls"]:
        for name in rule["names"]:
            if name in without:
                continue
            if rule.get("args"):
                with_args.append((numbers[name], rule))
                continue
            code += [(JEQ_K, 0, 1, numbers[name]), (RET_K, 0, 0, action(rule, default_errno))]
    for number, rule in with_args:  # each block reloads the number: the argument checks overwrite A
        (arg,) = rule["args"]
        assert arg["op"] == "SCMP_CMP_MASKED_EQ" and arg["value"] < 2**32 and arg["valueTwo"] < 2**32
        code += [(LD_W_ABS, 0, 0, OFFSET_NR), (JEQ_K, 0, 5, number),
                 (LD_W_ABS, 0, 0, OFFSET_ARGS + 8 * arg["index"]), (AND_K, 0, 0, arg["value"]),
                 (JEQ_K, 0, 1, arg["valueTwo"]), (RET_K, 0, 0, action(rule, default_errno)), (RET_K, 0, 0, deny)]
    code.append((RET_K, 0, 0, deny))
    return code


def main(argv):
    split = argv.index("--")
    profile_path, options, command = argv[1], argv[2:split], argv[split + 1:]
    without = {options[i + 1] for i in range(len(options)) if options[i] == "--without"}
    with open(profile_path) as f:
        code = compile_profile(json.load(f), without)
    filters = (SockFilter * len(code))(*[SockFilter(*instruction) for instruction in code])
    program = SockFprog(len(code), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.syscall(SYS_SECCOMP, SECCOMP_SET_MODE_FILTER, 0, ctypes.byref(program)) != 0:
        sys.exit(f"seccomp_exec: cannot load the filter: {os.strerror(ctypes.get_errno())}")
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
