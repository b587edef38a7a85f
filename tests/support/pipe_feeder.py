"""Plays SageMaker's part in Pipe mode for tests: creates the FIFOs <channel>_0, <channel>_1, ... in a
channel's data folder one epoch after another and streams the channel's objects through each, back to back
(wrapped in RecordIO records when RecordWrapperType=RecordIO), as SageMaker does from S3.

    feeder = PipeFeeder(data_dir, "train", objects, epochs=2, wrap_recordio=False)
    feeder.start()   # a thread; each FIFO appears once the previous one has been read to its end
    ...
    feeder.join()    # raises what went wrong in the thread, if anything

Standard library only.
"""
import os
import struct
import threading

RECORDIO_MAGIC = 0xCED7230A


def recordio_wrap(data):
    """One RecordIO record holding `data` (a whole S3 object), as SageMaker's RecordWrapperType=RecordIO.
    Data holding the magic at a 4-byte-aligned offset is cut there into parts (cflag 1, 2, 3), as
    dmlc-core writes it."""
    magic = struct.pack("<I", RECORDIO_MAGIC)
    cuts = [i for i in range(0, len(data) - 3, 4) if data[i:i + 4] == magic]
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(data[start:cut])
        start = cut + 4
    pieces.append(data[start:])

    def part(cflag, body):
        return magic + struct.pack("<I", cflag << 29 | len(body)) + body + b"\0" * (-len(body) % 4)

    if len(pieces) == 1:
        return part(0, pieces[0])
    flags = [1] + [2] * (len(pieces) - 2) + [3]
    return b"".join(part(flag, body) for flag, body in zip(flags, pieces))


class PipeFeeder(threading.Thread):
    def __init__(self, data_dir, channel, objects, epochs, wrap_recordio=False, open_timeout=120):
        """objects: a list of file paths (or bytes), streamed in order every epoch."""
        super().__init__(daemon=True)
        self.data_dir = data_dir
        self.channel = channel
        self.objects = objects
        self.epochs = epochs
        self.wrap_recordio = wrap_recordio
        self.open_timeout = open_timeout
        self.error = None
        self.fed = 0  # epochs streamed to their end
        self._halt = threading.Event()

    def object_bytes(self, item):
        if isinstance(item, (bytes, bytearray)):
            return bytes(item)
        with open(item, "rb") as f:
            return f.read()

    def run(self):
        try:
            for epoch in range(self.epochs):
                path = os.path.join(self.data_dir, f"{self.channel}_{epoch}")
                os.mkfifo(path)
                fd = self._open_for_writing(path)
                if fd is None:
                    return
                with os.fdopen(fd, "wb") as out:
                    for item in self.objects:
                        data = self.object_bytes(item)
                        out.write(recordio_wrap(data) if self.wrap_recordio else data)
                self.fed += 1
        except BrokenPipeError:
            pass  # the reader stopped early (max_steps, a failure): as SageMaker, stop streaming
        except Exception as error:  # noqa: BLE001 - reported by join()
            self.error = error

    def _open_for_writing(self, path):
        # O_NONBLOCK open fails with ENXIO until a reader has the FIFO open: poll so that stop() works.
        waited = 0.0
        while not self._halt.is_set():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                os.set_blocking(fd, True)
                return fd
            except OSError as error:
                if error.errno != 6:  # ENXIO: no reader yet
                    raise
            self._halt.wait(0.05)
            waited += 0.05
            if waited > self.open_timeout:
                raise TimeoutError(f"nobody opened {path} within {self.open_timeout} s")
        return None

    def stop(self):
        self._halt.set()

    def join(self, timeout=None):
        super().join(timeout)
        if self.error is not None:
            raise self.error
