#!/usr/bin/env python3
"""A file whose reads never return, as on a stalled network file system (SageMaker FastFile, EFS, NFS).

    unshare --mount --propagation private python3 stalled_fuse.py MOUNTPOINT NAME SIZE -- COMMAND ARGS...

Mounts a FUSE file system on MOUNTPOINT (an existing, empty folder) holding one regular file NAME of SIZE
bytes, runs COMMAND with it mounted, and exits with COMMAND's exit code (128+N for a signal N) once it is
done. Looking the file up, its attributes and opening it work; a read of it is never answered, so the
reading thread blocks in read(2) as on a dead server. An interrupted read (a signal, the process ending)
is answered with EINTR, as a FUSE server that honours interrupts does, so that the reader's process can
end. Speaks the kernel's FUSE protocol directly on /dev/fuse (no libfuse); needs root. Run it in a private
mount namespace so that the mount cannot outlive it.
"""
import ctypes
import errno
import os
import stat
import struct
import subprocess
import sys
import threading

FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_OPEN, FUSE_READ = 1, 2, 3, 14, 15
FUSE_STATFS, FUSE_RELEASE, FUSE_FLUSH, FUSE_INIT, FUSE_OPENDIR = 17, 18, 25, 26, 27
FUSE_RELEASEDIR, FUSE_INTERRUPT, FUSE_DESTROY, FUSE_BATCH_FORGET = 29, 36, 38, 42
NO_REPLY = {FUSE_FORGET, FUSE_BATCH_FORGET}
IN_HEADER = struct.Struct("<IIQQIIII")  # len, opcode, unique, nodeid, uid, gid, pid, padding
OUT_HEADER = struct.Struct("<IiQ")      # len, error, unique
ROOT, FILE = 1, 2


def attr(node, size):
    """struct fuse_attr."""
    mode = (stat.S_IFDIR | 0o755) if node == ROOT else (stat.S_IFREG | 0o644)
    return struct.pack("<QQQQQQIIIIIIIIII", node, size, (size + 511) // 512, 0, 0, 0, 0, 0, 0, mode,
                       2 if node == ROOT else 1, 0, 0, 0, 4096, 0)


class StalledFileSystem:
    def __init__(self, mountpoint, name, size):
        self.name, self.size = name.encode(), size
        self.fd = os.open("/dev/fuse", os.O_RDWR)
        libc = ctypes.CDLL(None, use_errno=True)
        options = f"fd={self.fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
        if libc.mount(b"stalled", mountpoint.encode(), b"fuse", 0x2 | 0x4, options) != 0:  # MS_NOSUID|MS_NODEV
            raise OSError(ctypes.get_errno(), f"mount {mountpoint}")
        self.pending_reads = set()  # unique ids of reads left unanswered
        self.lock = threading.Lock()

    def reply(self, unique, error=0, payload=b""):
        try:
            os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), -error, unique) + payload)
        except OSError:
            pass  # the request was interrupted meanwhile, or the file system is going away

    def serve(self):
        while True:
            try:
                request = os.read(self.fd, 1 << 20)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.EAGAIN):
                    continue
                return  # ENODEV: unmounted
            _, opcode, unique, node, *_ = IN_HEADER.unpack_from(request)
            body = request[IN_HEADER.size:]
            self.handle(opcode, unique, node, body)

    def handle(self, opcode, unique, node, body):
        if opcode in NO_REPLY:
            return
        if opcode == FUSE_INIT:
            major, minor = struct.unpack_from("<II", body)
            # major, minor, max_readahead, flags, max_background, congestion_threshold, max_write, time_gran,
            # max_pages, map_alignment, flags2, unused[7]
            self.reply(unique, 0, struct.pack("<IIIIHHIIHHI7I", 7, min(minor, 31), 0, 0, 16, 12, 65536, 1, 0, 0, 0,
                                              *([0] * 7)))
        elif opcode == FUSE_LOOKUP:
            if node == ROOT and body.rstrip(b"\0") == self.name:
                self.reply(unique, 0, struct.pack("<QQQQII", FILE, 0, 60, 60, 0, 0) + attr(FILE, self.size))
            else:
                self.reply(unique, errno.ENOENT)
        elif opcode == FUSE_GETATTR:
            self.reply(unique, 0, struct.pack("<QII", 60, 0, 0) + attr(node, self.size if node == FILE else 0))
        elif opcode in (FUSE_OPEN, FUSE_OPENDIR):
            self.reply(unique, 0, struct.pack("<QII", 1, 0, 0))
        elif opcode == FUSE_READ:
            with self.lock:
                self.pending_reads.add(unique)  # never answered: the stall
        elif opcode == FUSE_INTERRUPT:
            (interrupted,) = struct.unpack_from("<Q", body)
            with self.lock:
                known = interrupted in self.pending_reads
                self.pending_reads.discard(interrupted)
            if known:
                self.reply(interrupted, errno.EINTR)
        elif opcode in (FUSE_RELEASE, FUSE_RELEASEDIR, FUSE_FLUSH, FUSE_DESTROY):
            self.reply(unique)
        else:
            self.reply(unique, errno.ENOSYS)


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        sys.exit(__doc__)
    mountpoint, name, size, command = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[5:]
    file_system = StalledFileSystem(mountpoint, name, size)
    threading.Thread(target=file_system.serve, daemon=True).start()
    os.stat(os.path.join(mountpoint, name))  # answered once INIT is: the file system is ready
    code = subprocess.call(command)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(mountpoint.encode(), 2)  # MNT_DETACH
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
