#!/usr/bin/env python3
"""A TCP relay between one cluster agent and etcd that a test can cut (tests/integration/
test_fencing.sh): while CUTFILE exists every byte each way is dropped and the connections are
held open, new ones too, as a network partition looks to the agent (its calls time out);
once CUTFILE is gone the held connections are closed and new ones pass again. With DELAYFILE,
while that file exists every chunk each way waits the milliseconds it holds before it passes
(a slow etcd: nothing is lost, everything is late; tests/integration/test_etcd.sh).

    etcd_relay.py LISTEN_PORT TARGET_PORT CUTFILE [DELAYFILE]      (127.0.0.1 both sides)
"""
import asyncio
import os
import signal
import sys

HOST = "127.0.0.1"


def main():
    listen, target, cut = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    delay = sys.argv[4] if len(sys.argv) > 4 else None

    def delay_s():
        try:
            with open(delay) as f:
                return int(f.read().strip() or 0) / 1000.0
        except (OSError, TypeError, ValueError):
            return 0.0

    async def pump(r, w, state):
        try:
            while True:
                data = await r.read(65536)
                if not data:
                    break
                if os.path.exists(cut):
                    state["cut"] = True
                    continue
                if state["cut"]:
                    break
                d = delay_s()
                if d > 0:
                    await asyncio.sleep(d)
                w.write(data)
                await w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            w.close()

    async def client(cr, cw):
        state = {"cut": os.path.exists(cut)}
        if state["cut"]:
            # A black hole: read and drop until the cut is lifted, then close.
            try:
                while os.path.exists(cut):
                    try:
                        await asyncio.wait_for(cr.read(65536), 0.2)
                    except asyncio.TimeoutError:
                        pass
                    if cr.at_eof():
                        break
            except (ConnectionError, OSError):
                pass
            cw.close()
            return
        try:
            er, ew = await asyncio.open_connection(HOST, target)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pump(cr, ew, state), pump(er, cw, state))

    async def run():
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
        server = await asyncio.start_server(client, HOST, listen)
        async with server:
            await stop

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
