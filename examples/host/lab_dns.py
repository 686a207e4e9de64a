"""A tiny DNS server for examples/host/lab.sh's origin namespace: every
A question for a name under `lab.test` is answered with ADDRESS (TTL 60),
every other question with NXDOMAIN. UDP only, standard library only.

    python3 lab_dns.py LISTEN_ADDRESS ORIGIN_ADDRESS
"""
import socket
import struct
import sys

listen, origin = sys.argv[1], socket.inet_aton(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((listen, 53))
while True:
    q, peer = s.recvfrom(512)
    if len(q) < 12:
        continue
    (qid,) = struct.unpack("!H", q[:2])
    # The question: labels up to the zero byte, then type and class.
    i, labels = 12, []
    while i < len(q) and q[i] != 0:
        labels.append(q[i + 1 : i + 1 + q[i]].decode("ascii", "replace"))
        i += 1 + q[i]
    question = q[12 : i + 5]
    qtype = struct.unpack("!H", q[i + 1 : i + 3])[0] if i + 3 <= len(q) else 0
    name = ".".join(labels).lower()
    ours = name == "lab.test" or name.endswith(".lab.test")
    answers = b""
    if ours and qtype == 1:
        answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + origin
    flags = 0x8180 if ours else 0x8183  # a response, recursion available; NXDOMAIN
    head = struct.pack("!HHHHHH", qid, flags, 1, 1 if answers else 0, 0, 0)
    s.sendto(head + question + answers, peer)
