"""Real stream servers on 127.0.0.1 for the live-source tests (nothing is mocked: FFmpeg connects to them).

RtspServer: a small RTSP server (RFC 2326: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN) sending H.264 over RTP
(RFC 6184: single NAL units and FU-A fragments) interleaved on the TCP connection, encoded by PyAV's libx264.
Nothing on PyPI serves RTSP without a system binary, and CI installs no apt package. ``cut(seconds)`` drops
every client and refuses connections for a while: a stream that drops and comes back.

MjpegServer: multipart/x-mixed-replace JPEG over HTTP, the way IP cameras serve MJPEG.
"""

from __future__ import annotations

import base64
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def moving_frames(count: int, width: int = 160, height: int = 120) -> list[np.ndarray]:
    """Frames that differ from each other: a bright square moving over a gradient."""
    frames = []
    ramp = np.linspace(0, 255, width, dtype=np.float32)[None, :].repeat(height, 0)
    for n in range(count):
        image = np.stack([ramp, np.full_like(ramp, (n * 8) % 256), ramp[::-1, ::-1]], axis=2).astype(np.uint8)
        x = (n * 7) % (width - 24)
        image[40:64, x:x + 24] = 255
        frames.append(image)
    return frames


def write_video(path, frames: list[np.ndarray], codec: str = "libx264", fps: int = 30) -> None:
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.height, stream.width = frames[0].shape[:2]
        stream.pix_fmt = "yuv420p" if codec != "mjpeg" else "yuvj420p"
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def h264_access_units(frames: list[np.ndarray], fps: int = 30) -> list[list[bytes]]:
    """Annex B H.264 of ``frames``, split into NAL units per access unit; every keyframe carries SPS/PPS."""
    import av

    ctx = av.CodecContext.create("libx264", "w")
    ctx.width, ctx.height = frames[0].shape[1], frames[0].shape[0]
    ctx.pix_fmt = "yuv420p"
    ctx.framerate = fps
    ctx.gop_size = 10
    ctx.options = {"tune": "zerolatency", "x264-params": "repeat-headers=1:bframes=0"}
    units = []
    packets = []
    for n, image in enumerate(frames):
        frame = av.VideoFrame.from_ndarray(image, format="rgb24")
        frame.pts = n
        packets.extend(ctx.encode(frame))
    packets.extend(ctx.encode(None))
    for packet in packets:
        units.append(_split_annexb(bytes(packet)))
    return units


def _split_annexb(data: bytes) -> list[bytes]:
    nals, i, start = [], 0, None
    while i + 3 <= len(data):
        if data[i:i + 3] == b"\x00\x00\x01":
            if start is not None:
                nals.append(data[start:i].rstrip(b"\x00"))
            i += 3
            start = i
        else:
            i += 1
    if start is not None:
        nals.append(data[start:])
    return [n for n in nals if n]


class RtspServer:
    def __init__(self, frames: list[np.ndarray], fps: int = 30, path: str = "/cam") -> None:
        self.units = h264_access_units(frames, fps)
        self.fps = fps
        self.path = path
        nal_types = {n[0] & 0x1F: n for unit in self.units for n in unit}
        self.sps, self.pps = nal_types[7], nal_types[8]
        self.port = 0
        self._clients: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.connections = 0

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.port}{self.path}"

    def start(self) -> RtspServer:
        self._listen()
        return self

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        self.port = listener.getsockname()[1]
        listener.listen(8)
        listener.settimeout(0.1)
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept(self, listener: socket.socket) -> None:
        while not self._stop.is_set() and self._listener is listener:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            with self._lock:
                self._clients.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
        listener.close()

    def cut(self, seconds: float) -> None:
        """Drop every client and refuse connections for ``seconds``, then listen again on the same port."""
        self._listener = None  # the accept loop closes it
        self._drop_clients()
        time.sleep(seconds)
        if not self._stop.is_set():
            self._listen()

    def _drop_clients(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for conn in clients:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._listener = None
        self._drop_clients()
        for thread in self._threads:
            thread.join(2)

    def __enter__(self) -> RtspServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- one client ------------------------------------------------------------------------------------------------
    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        playing = threading.Event()
        try:
            while not self._stop.is_set():
                chunk = conn.recv(4096)
                if not chunk:
                    return
                buffer += chunk
                while True:
                    if buffer[:1] == b"$":  # the client's interleaved RTCP: skip it
                        if len(buffer) < 4:
                            break
                        size = struct.unpack(">H", buffer[2:4])[0]
                        if len(buffer) < 4 + size:
                            break
                        buffer = buffer[4 + size:]
                        continue
                    end = buffer.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    head, buffer = buffer[:end].decode("latin-1"), buffer[end + 4:]
                    self._answer(conn, head, playing)
        except OSError:
            return
        finally:
            playing.clear()
            conn.close()

    def _answer(self, conn: socket.socket, head: str, playing: threading.Event) -> None:
        lines = head.split("\r\n")
        method, url = lines[0].split(" ")[:2]
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        cseq = headers.get("cseq", "0")
        extra, body = "", ""
        if method == "OPTIONS":
            extra = "Public: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN, GET_PARAMETER\r\n"
        elif method == "DESCRIBE":
            if not url.split("?")[0].endswith(self.path):
                conn.sendall(f"RTSP/1.0 404 Not Found\r\nCSeq: {cseq}\r\n\r\n".encode())
                return
            sprop = ",".join(base64.b64encode(x).decode() for x in (self.sps, self.pps))
            body = ("v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=edgeaccel test\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
                    "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n"
                    f"a=fmtp:96 packetization-mode=1;sprop-parameter-sets={sprop}\r\na=control:track1\r\n")
            extra = f"Content-Base: {url}/\r\nContent-Type: application/sdp\r\n"
        elif method == "SETUP":
            extra = "Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\nSession: 12345678\r\n"
        elif method == "PLAY":
            extra = "Session: 12345678\r\n"
        elif method == "TEARDOWN":
            playing.clear()
        data = f"RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\n{extra}Content-Length: {len(body)}\r\n\r\n{body}"
        conn.sendall(data.encode())
        if method == "PLAY" and not playing.is_set():
            playing.set()
            threading.Thread(target=self._send, args=(conn, playing), daemon=True).start()

    def _send(self, conn: socket.socket, playing: threading.Event) -> None:
        seq, n = 0, 0
        start = time.monotonic()
        try:
            while playing.is_set() and not self._stop.is_set():
                unit = self.units[n % len(self.units)]
                stamp = (n * 90000 // self.fps) & 0xFFFFFFFF
                packets = []
                for k, nal in enumerate(unit):
                    last = k == len(unit) - 1
                    packets.extend(_rtp_payloads(nal, last))
                for payload, marker in packets:
                    header = struct.pack(">BBHII", 0x80, (0x80 if marker else 0) | 96, seq & 0xFFFF, stamp, 0x1234)
                    seq += 1
                    rtp = header + payload
                    conn.sendall(b"$\x00" + struct.pack(">H", len(rtp)) + rtp)
                n += 1
                delay = start + n / self.fps - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        except OSError:
            return


def _rtp_payloads(nal: bytes, last_of_unit: bool, mtu: int = 1400) -> list[tuple[bytes, bool]]:
    if len(nal) <= mtu:
        return [(nal, last_of_unit)]
    indicator = (nal[0] & 0xE0) | 28  # FU-A
    kind = nal[0] & 0x1F
    body = nal[1:]
    out = []
    for pos in range(0, len(body), mtu):
        piece = body[pos:pos + mtu]
        first, end = pos == 0, pos + mtu >= len(body)
        fu_header = (0x80 if first else 0) | (0x40 if end else 0) | kind
        out.append((bytes([indicator, fu_header]) + piece, end and last_of_unit))
    return out


class MjpegServer:
    """``/stream.mjpg``: ``frames`` as multipart JPEG at ``fps``, looping until the server stops."""

    def __init__(self, frames: list[np.ndarray], fps: int = 30) -> None:
        import io

        from PIL import Image

        self.jpegs = []
        for image in frames:
            out = io.BytesIO()
            Image.fromarray(image).save(out, format="JPEG", quality=90)
            self.jpegs.append(out.getvalue())
        self.fps = fps
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet test output
                pass

            def do_GET(self):
                if self.path != "/stream.mjpg":
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
                self.end_headers()
                n = 0
                try:
                    while not server.stopping.is_set():
                        jpeg = server.jpegs[n % len(server.jpegs)]
                        self.wfile.write(b"--frame\r\nContent-Type: image/jpeg\r\n"
                                         + f"Content-Length: {len(jpeg)}\r\n\r\n".encode() + jpeg + b"\r\n")
                        n += 1
                        time.sleep(1.0 / server.fps)
                except OSError:
                    return

        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/stream.mjpg"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def __enter__(self) -> MjpegServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(2)


def pipeline_threads_gone(timeout: float = 10.0) -> bool:
    """Whether every pipeline thread has ended within ``timeout`` (other edgeaccel threads, such as the isolation
    spawner, live on by design)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not [t for t in threading.enumerate() if t.name.startswith("edgeaccel-pipeline-")]:
            return True
        time.sleep(0.05)
    return False
