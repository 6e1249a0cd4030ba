import os from 'node:os';

/**
 * The seccomp filter bubblewrap installs on every sandboxed process (its
 * `--seccomp FD` option reads a compiled classic-BPF program from that fd).
 *
 * Why: a read-only mount does not stop connect() to a unix socket on it (a
 * service listening in a directory bound into the sandbox). The network
 * namespace only covers IP and abstract unix addresses. The sandbox shows
 * the host directories it binds through overlays (see host-binds.ts), where
 * no host socket answers, so a unix stream socket of the verifier's own
 * (multiprocessing's managers and fork server listen on one in a temporary
 * directory) reaches nothing of the host; where overlays cannot be made,
 * the filter refuses AF_UNIX sockets altogether (`unixStream` false). Other unix socket
 * types are always refused, and every socket pair but a stream pair: a
 * datagram socket can be addressed anew by sendto(), and the kernel silently
 * turns SOCK_RAW into SOCK_DGRAM, so only the type that stays connected to
 * its peer passes (asyncio's self-pipe, multiprocessing's duplex pipes). io_uring is
 * refused as well, since its requests can open sockets without the socket
 * syscall. TCP and UDP sockets stay allowed: the sandbox's network is a
 * loopback of its own, and smoke's server and player meet on it.
 *
 * It also refuses, as Flatpak's filter does, what no verifier needs and a
 * sandboxed process could use against the host or its own supervisor: the
 * kernel keyrings (not namespaced: the caller's session keyring would be
 * readable), ptrace and reading other processes' memory, mounts and new
 * namespaces, the kernel log, BPF, userfaultfd, perf events, kcmp and file
 * handles that open by inode. And no signal reaches the sandbox's init (pid
 * 1) or the supervisor (pid 2, the process bubblewrap starts), nor any group
 * or broadcast they belong to: a verifier that stopped its supervisor would
 * stall the audit in timeouts and restarts. Signals to the verifier's own
 * processes pass. Nor can the kernel be made to send one on its behalf: the
 * owner and the signal of a descriptor's I/O notices (fcntl F_SETOWN,
 * F_SETOWN_EX, F_SETSIG; ioctl FIOSETOWN, SIOCSPGRP) cannot be set, since
 * that owner may be any process or group, the supervisor's included, and
 * the signal any one, SIGSTOP included. Nothing a verifier runs sets them.
 *
 * Only for the architectures we know the syscall numbers of; elsewhere the
 * sandbox runs without the filter (docs/isolation.md says so).
 */

interface Arch {
  /** AUDIT_ARCH_* value the kernel puts in seccomp_data.arch. */
  audit: number;
  socket: number;
  socketpair: number;
  fcntl: number;
  ioctl: number;
  /** kill(2), then the calls that signal one thread or queue a signal: tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo. */
  kill: number;
  signalThread: readonly number[];
  /** Refused with EPERM. */
  denied: readonly number[];
  /** x86_64 also accepts x32 syscalls, numbered with this bit set: refused, so they cannot dodge the checks. */
  x32Bit: number | null;
}

const ARCHES: Partial<Record<NodeJS.Architecture, Arch>> = {
  x64: {
    audit: 0xc000003e,
    socket: 41,
    socketpair: 53,
    fcntl: 72,
    ioctl: 16,
    kill: 62,
    signalThread: [200, 234, 129, 297],
    // ptrace, syslog, uselib, modify_ldt, pivot_root, chroot, acct, mount, umount2, quotactl,
    // add_key, request_key, keyctl, unshare, perf_event_open, name_to_handle_at,
    // open_by_handle_at, setns, process_vm_readv, process_vm_writev, kcmp, bpf, userfaultfd
    denied: [101, 103, 134, 154, 155, 161, 163, 165, 166, 179, 248, 249, 250, 272, 298, 303, 304, 308, 310, 311, 312, 321, 323],
    x32Bit: 0x40000000,
  },
  arm64: {
    audit: 0xc00000b7,
    socket: 198,
    socketpair: 199,
    fcntl: 25,
    ioctl: 29,
    kill: 129,
    signalThread: [130, 131, 138, 240],
    // umount2, mount, pivot_root, chroot, quotactl, acct, unshare, syslog, ptrace, add_key,
    // request_key, keyctl, perf_event_open, name_to_handle_at, open_by_handle_at, setns,
    // process_vm_readv, process_vm_writev, kcmp, bpf, userfaultfd
    denied: [39, 40, 41, 51, 60, 89, 97, 116, 117, 217, 218, 219, 241, 264, 265, 268, 270, 271, 272, 280, 282],
    x32Bit: null,
  },
};

/** Same numbers on every architecture with the unified syscall table. */
const NR_IO_URING_SETUP = 425;
/** The new mount API: open_tree, move_mount, fsopen, fsconfig, fsmount, fspick; and mount_setattr. */
const NEW_MOUNT_API = [428, 429, 430, 431, 432, 433, 442];
/** pidfd_open can name the supervisor; pidfd_send_signal also takes a /proc/PID directory. */
const NR_PIDFD_SEND_SIGNAL = 424;
const NR_PIDFD_OPEN = 434;
/** bubblewrap's init and the process it starts (the supervisor), in the sandbox's PID namespace. */
const PROTECTED_PIDS = [1, 2];
/** fcntl commands that set who gets a descriptor's signals, and which signal: F_SETOWN, F_SETSIG, F_SETOWN_EX. */
const FCNTL_SIGNAL_OWNER = [8, 10, 15];
/** The same through ioctl: FIOSETOWN, SIOCSPGRP. */
const IOCTL_SIGNAL_OWNER = [0x8901, 0x8902];
const AF_UNIX = 1;
const SOCK_STREAM = 1;
/** socket(2)'s type carries SOCK_NONBLOCK and SOCK_CLOEXEC in its high bits. */
const SOCK_TYPE_MASK = 0xf;
const EPERM = 1;
const EACCES = 13;
const ENOSYS = 38;

const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO = 0x00050000;

// struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
/** The low 32 bits of args[n], on a little-endian machine. */
const offsetArg = (n: number): number => 16 + 8 * n;

// Classic BPF opcodes (linux/bpf_common.h).
const BPF_LD_W_ABS = 0x20;
const BPF_ALU_AND_K = 0x54;
const BPF_JMP_JEQ_K = 0x15;
const BPF_JMP_JSET_K = 0x45;
const BPF_RET_K = 0x06;

type Target = string | null;
interface Instruction {
  code: number;
  k: number;
  /** Label to jump to when the test holds / fails; null falls through to the next instruction. */
  jt?: Target;
  jf?: Target;
  label?: string;
}

const load = (offset: number, label?: string): Instruction => ({ code: BPF_LD_W_ABS, k: offset, ...(label ? { label } : {}) });
const and = (k: number): Instruction => ({ code: BPF_ALU_AND_K, k });
const jeq = (k: number, jt: Target, jf: Target): Instruction => ({ code: BPF_JMP_JEQ_K, k, jt, jf });
const jset = (k: number, jt: Target, jf: Target): Instruction => ({ code: BPF_JMP_JSET_K, k, jt, jf });
const ret = (k: number, label?: string): Instruction => ({ code: BPF_RET_K, k, ...(label ? { label } : {}) });

function program(arch: Arch, unixStream: boolean): Instruction[] {
  return [
    load(OFFSET_ARCH),
    // A foreign architecture (i386 on x86_64) has other syscall numbers: refuse all of it.
    jeq(arch.audit, null, 'eperm'),
    load(OFFSET_NR),
    ...(arch.x32Bit === null ? [] : [jset(arch.x32Bit, 'eperm', null)]),
    jeq(arch.socket, 'socket', null),
    jeq(arch.socketpair, 'socketpair', null),
    jeq(arch.fcntl, 'fcntl', null),
    jeq(arch.ioctl, 'ioctl', null),
    jeq(NR_IO_URING_SETUP, 'enosys', null),
    ...NEW_MOUNT_API.map((nr) => jeq(nr, 'enosys', null)),
    ...arch.denied.map((nr) => jeq(nr, 'eperm', null)),
    jeq(arch.kill, 'kill', null),
    ...[...arch.signalThread, NR_PIDFD_OPEN].map((nr) => jeq(nr, 'signal', null)),
    jeq(NR_PIDFD_SEND_SIGNAL, 'eperm', null),
    ret(SECCOMP_RET_ALLOW),
    // kill(0), kill(-1) and kill(-2) reach the supervisor's group or everyone.
    load(offsetArg(0), 'kill'),
    ...[0, -1, -2].map((pid) => jeq(pid >>> 0, 'eperm', null)),
    load(offsetArg(0), 'signal'),
    ...PROTECTED_PIDS.map((pid) => jeq(pid, 'eperm', null)),
    ret(SECCOMP_RET_ALLOW),
    // Classic BPF jumps forward only, hence an allow at the end of each check.
    load(offsetArg(1), 'fcntl'),
    ...FCNTL_SIGNAL_OWNER.map((cmd) => jeq(cmd, 'eperm', null)),
    ret(SECCOMP_RET_ALLOW),
    load(offsetArg(1), 'ioctl'),
    ...IOCTL_SIGNAL_OWNER.map((cmd) => jeq(cmd, 'eperm', null)),
    ret(SECCOMP_RET_ALLOW),
    load(offsetArg(0), 'socket'),
    jeq(AF_UNIX, null, 'allow'),
    ...(unixStream ? [load(offsetArg(1)), and(SOCK_TYPE_MASK), jeq(SOCK_STREAM, 'allow', 'eacces')] : [ret(SECCOMP_RET_ERRNO | EACCES)]),
    // A pair of another family (AF_INET pairs do not exist) is the kernel's to refuse.
    load(offsetArg(0), 'socketpair'),
    jeq(AF_UNIX, null, 'allow'),
    load(offsetArg(1)),
    and(SOCK_TYPE_MASK),
    jeq(SOCK_STREAM, 'allow', 'eacces'),
    ret(SECCOMP_RET_ALLOW, 'allow'),
    ret(SECCOMP_RET_ERRNO | EACCES, 'eacces'),
    ret(SECCOMP_RET_ERRNO | EPERM, 'eperm'),
    // ENOSYS, so that libraries probing for io_uring fall back to ordinary I/O.
    ret(SECCOMP_RET_ERRNO | ENOSYS, 'enosys'),
  ];
}

/** Lay the program out as `struct sock_filter[]` in native byte order, resolving labels to relative jumps. */
function assemble(instructions: readonly Instruction[]): Buffer {
  const at = new Map<string, number>();
  instructions.forEach((instruction, index) => {
    if (instruction.label) at.set(instruction.label, index);
  });
  const offset = (target: Target | undefined, from: number): number => {
    if (target === undefined || target === null) return 0;
    const index = at.get(target);
    const jump = index === undefined ? -1 : index - from - 1;
    // Classic BPF only jumps forward, by at most 255.
    if (jump < 0 || jump > 255) throw new Error(`seccomp program: bad jump to ${target}`);
    return jump;
  };
  const bytes = Buffer.alloc(instructions.length * 8);
  instructions.forEach((instruction, index) => {
    bytes.writeUInt16LE(instruction.code, index * 8);
    bytes.writeUInt8(offset(instruction.jt, index), index * 8 + 2);
    bytes.writeUInt8(offset(instruction.jf, index), index * 8 + 3);
    bytes.writeUInt32LE(instruction.k >>> 0, index * 8 + 4);
  });
  return bytes;
}

const cached = new Map<boolean, Buffer | null>();

/** The compiled filter for this machine, or null where we do not know its syscall numbers. */
export function seccompProgram(unixStream = true): Buffer | null {
  let compiled = cached.get(unixStream);
  if (compiled === undefined) {
    const arch = ARCHES[process.arch];
    // Both known architectures are little-endian; the layout above assumes it.
    compiled = arch && os.endianness() === 'LE' ? assemble(program(arch, unixStream)) : null;
    cached.set(unixStream, compiled);
  }
  return compiled;
}
