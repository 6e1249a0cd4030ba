import os from 'node:os';

/**
 * The seccomp filter bubblewrap installs on every sandboxed process (its
 * `--seccomp FD` option reads a compiled classic-BPF program from that fd).
 *
 * Why: the sandbox sees the host's filesystem read-only, and a read-only
 * mount does not stop connect() to a unix socket on it (a service listening
 * in /var/tmp, a database's socket). The network namespace only covers IP.
 * So the filter refuses to create AF_UNIX sockets at all, and to create the
 * one kind of unix socket pair that can still be pointed at a path later
 * (SOCK_DGRAM: connect() and sendto() re-address it). Stream and seqpacket
 * pairs stay allowed: they are born connected to each other and nothing
 * else (asyncio's self-pipe, multiprocessing's duplex pipes). io_uring is
 * refused as well, since its requests can open sockets without the socket
 * syscall. TCP and UDP sockets stay allowed: without --share-net there is no
 * network to reach, and smoke's loopback server needs them with it.
 *
 * Only for the architectures we know the syscall numbers of; elsewhere the
 * sandbox runs without the filter (the README says so).
 */

interface Arch {
  /** AUDIT_ARCH_* value the kernel puts in seccomp_data.arch. */
  audit: number;
  socket: number;
  socketpair: number;
  /** x86_64 also accepts x32 syscalls, numbered with this bit set: refused, so they cannot dodge the checks. */
  x32Bit: number | null;
}

const ARCHES: Partial<Record<NodeJS.Architecture, Arch>> = {
  x64: { audit: 0xc000003e, socket: 41, socketpair: 53, x32Bit: 0x40000000 },
  arm64: { audit: 0xc00000b7, socket: 198, socketpair: 199, x32Bit: null },
};

/** Same number on every architecture with the unified syscall table. */
const NR_IO_URING_SETUP = 425;
const AF_UNIX = 1;
const SOCK_DGRAM = 2;
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

function program(arch: Arch): Instruction[] {
  return [
    load(OFFSET_ARCH),
    // A foreign architecture (i386 on x86_64) has other syscall numbers: refuse all of it.
    jeq(arch.audit, null, 'eperm'),
    load(OFFSET_NR),
    ...(arch.x32Bit === null ? [] : [jset(arch.x32Bit, 'eperm', null)]),
    jeq(arch.socket, 'socket', null),
    jeq(arch.socketpair, 'socketpair', null),
    jeq(NR_IO_URING_SETUP, 'enosys', null),
    ret(SECCOMP_RET_ALLOW),
    // Classic BPF jumps forward only, hence an allow at the end of each check.
    load(offsetArg(0), 'socket'),
    jeq(AF_UNIX, 'eacces', null),
    ret(SECCOMP_RET_ALLOW),
    load(offsetArg(1), 'socketpair'),
    and(SOCK_TYPE_MASK),
    jeq(SOCK_DGRAM, 'eacces', null),
    ret(SECCOMP_RET_ALLOW),
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

let cached: Buffer | null | undefined;

/** The compiled filter for this machine, or null where we do not know its syscall numbers. */
export function seccompProgram(): Buffer | null {
  if (cached === undefined) {
    const arch = ARCHES[process.arch];
    // Both known architectures are little-endian; the layout above assumes it.
    cached = arch && os.endianness() === 'LE' ? assemble(program(arch)) : null;
  }
  return cached;
}
