"""Stopping a running `train` the way SageMaker does, at a known step: read its output until the line of
step STEP, send SIGTERM, then read on until it exits. Standard library only."""
import signal
import time


def stop_at_step(process, step, timeout, exit_timeout=150):
    """`process`: a Popen of train with text stdout (stderr merged). Returns (exit code, output lines, whether
    the step's line came within `timeout` s). Kills the process on any timeout (the code is then its kill's)."""
    seen, found = [], False
    deadline = time.monotonic() + timeout
    try:
        for line in process.stdout:
            seen.append(line)
            if f"step={step} " in line:
                found = True
                process.send_signal(signal.SIGTERM)
                break
            if time.monotonic() > deadline:
                break
        if found:
            seen.extend(process.stdout.readlines())
            process.wait(timeout=exit_timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, seen, found
