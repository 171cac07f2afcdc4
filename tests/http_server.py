#!/usr/bin/python3
"""A tiny HTTP server for goldminer's tests.

Usage: http_server.py DIR
Serves DIR on 127.0.0.1 at a free port and prints that port on the first line of
stdout once it is listening. Besides plain files:
  /flaky/PATH     answers 503 to the first request for that exact URL, then serves PATH
  /redirect/PATH  answers 302 with Location: /PATH
  /reset/PATH     closes the connection without answering
"""
import functools
import http.server
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    seen = set()

    def do_GET(self):
        if self.path.startswith("/flaky/"):
            if self.path not in Handler.seen:
                Handler.seen.add(self.path)
                self.send_error(503)
                return
            self.path = self.path[len("/flaky"):]
        elif self.path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", self.path[len("/redirect"):])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        elif self.path.startswith("/reset/"):
            self.close_connection = True
            return
        super().do_GET()

    def log_message(self, format, *args):  # keep test output clean
        pass


def main():
    directory = sys.argv[1]
    handler = functools.partial(Handler, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
