"""A separate publisher process for the live tests: `publisher.py NAME FRAMES INTERVAL_MS [SLOTS]`.

Prints "ready" once the segment exists, publishes FRAMES synthetic frames INTERVAL_MS apart, then
retires the segment (a clean stop) unless told to vanish ("crash" as 5th argument: no retirement).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synthetic  # noqa: E402


def main():
    name, frames, interval_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    slots = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    crash = len(sys.argv) > 5 and sys.argv[5] == "crash"
    writer = synthetic.make_writer(name, slot_count=slots, heartbeat_period_s=0.1)
    print("ready", flush=True)
    for n in range(1, frames + 1):
        synthetic.publish(writer, n, processes=64)
        writer.heartbeat()
        time.sleep(interval_ms / 1000)
    if crash:
        os._exit(0)  # no retirement: readers must notice the stale heartbeat
    writer.close(keep_name=True)


if __name__ == "__main__":
    main()
