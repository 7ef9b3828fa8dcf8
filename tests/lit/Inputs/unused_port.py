"""Prints a TCP port for ranks started by hand to meet at (MASTER_PORT).

The port is below the kernel's ephemeral range (ip_local_port_range): a port
the kernel chose (bind to port 0) is merely free at that moment, and any
process's next connection or bind may take it before rank 0 listens, which
fails rank 0 or has a rank meet another test's store. Ports below the range
are only ever taken by name; one is picked at random and checked free, with
the port after it (torchrun's ranks listen on MASTER_PORT + 1).
"""
import random
import socket


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


low = ephemeral_low()
first = max(1024, low - 16384)
for _ in range(1000):
    port = random.randrange(first, low - 1)
    if bindable(port) and bindable(port + 1):
        print(port)
        break
else:
    raise SystemExit("no unused port below %d" % low)
