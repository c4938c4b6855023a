"""gantry.flash (the flash runtime's entry point): the build's download, check, cache and staging, and which handler is served."""

import hashlib
import http.server
import io
import json
import os
import sys
import tarfile
import tempfile
import threading
import unittest
from unittest import mock

import support  # noqa: F401  (puts sdk/python on sys.path)

import gantry.flash as entry
from gantry._runtime_artifact import ensure_flash_build as ensure_artifact
from gantry._runtime_common import Fatal


def make_tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in entries.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()


class Server:
    """Serves one body at /artifact and counts the requests."""

    def __init__(self, body):
        outer = self
        self.hits = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/artifact"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class ArtifactTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.cache = os.path.join(self.tmp.name, "cache")

    def tearDown(self):
        self.tmp.cleanup()

    def test_downloads_checks_unpacks_and_then_uses_the_cache(self):
        data, sha = make_tar({"./flash_manifest.json": "{}", "./handler_a.py": "X = 1\n"})
        server = Server(data)
        try:
            tarball, tree = ensure_artifact(server.url, sha, self.cache)
            self.assertEqual(open(os.path.join(tree, "handler_a.py")).read(), "X = 1\n")
            with open(tarball, "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), sha)
            self.assertEqual(ensure_artifact(server.url, sha, self.cache), (tarball, tree))
            self.assertEqual(server.hits, 1)
        finally:
            server.close()

    def test_refuses_bytes_whose_sha256_differs(self):
        data, _ = make_tar({"./handler_a.py": "X = 1\n"})
        server = Server(data)
        try:
            with self.assertRaisesRegex(Fatal, "refusing to run it"):
                ensure_artifact(server.url, "0" * 64, self.cache)
            self.assertEqual([e for e in os.listdir(self.cache) if not e.endswith(".lock")], [])
        finally:
            server.close()

    def test_refuses_entries_outside_the_tree(self):
        data, sha = make_tar({"../escaped.py": "X = 1\n"})
        server = Server(data)
        try:
            with self.assertRaises(Fatal):
                ensure_artifact(server.url, sha, self.cache)
            self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "escaped.py")))
        finally:
            server.close()

    def test_refuses_a_digest_that_is_not_one(self):
        with self.assertRaises(Fatal) as e:
            ensure_artifact("http://127.0.0.1:9/", "abc", self.cache)
        self.assertEqual(e.exception.code, 2)


class MainTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.staged = os.path.join(self.tmp.name, "root", ".runpod", "artifact.tar.gz")
        self.cwd = os.getcwd()
        self.path = list(sys.path)

    def tearDown(self):
        os.chdir(self.cwd)
        sys.path[:] = self.path
        self.tmp.cleanup()

    def run_main(self, entries, env):
        data, sha = make_tar(entries)
        server = Server(data)
        try:
            full = {"GANTRY_ARTIFACT_URL": server.url, "GANTRY_ARTIFACT_SHA256": sha,
                    "GANTRY_ARTIFACT_CACHE": os.path.join(self.tmp.name, "cache"), **env}
            with mock.patch.object(entry, "STAGED", self.staged):
                entry.main(full)
        finally:
            server.close()
        return sha

    def test_runs_a_queue_handler_as_a_script_from_the_unpacked_build(self):
        out = os.path.join(self.tmp.name, "ran.json")
        handler = (
            "import json, os\n"
            "if __name__ == '__main__':\n"
            f"    json.dump({{'cwd': os.getcwd(), 'manifest': os.path.exists('flash_manifest.json')}}, open({out!r}, 'w'))\n"
        )
        manifest = json.dumps({"resources": {"cpu_worker": {"is_load_balanced": False}}})
        sha = self.run_main({"./flash_manifest.json": manifest, "./handler_cpu_worker.py": handler},
                            {"FLASH_RESOURCE_NAME": "cpu_worker"})
        ran = json.load(open(out))
        self.assertTrue(ran["manifest"])
        self.assertTrue(ran["cwd"].endswith(f"flash-{sha}"))
        # Staged where flash's workers keep it: the verified bytes.
        with open(self.staged, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), sha)

    def test_serves_a_load_balanced_resource_s_app(self):
        manifest = json.dumps({"resources": {"api": {"is_load_balanced": True}}})
        served = {}
        with mock.patch.object(entry, "serve_lb", lambda f, port: served.update(file=f, port=port)):
            self.run_main({"./flash_manifest.json": manifest, "./handler_api.py": "app = object()\n"},
                          {"FLASH_RESOURCE_NAME": "api", "PORT": "8123"})
        self.assertTrue(served["file"].endswith("handler_api.py"))
        self.assertEqual(served["port"], 8123)

    def test_names_a_resource_the_build_lacks(self):
        with self.assertRaisesRegex(Fatal, "no handler_other.py"):
            self.run_main({"./handler_api.py": "app = object()\n"}, {"FLASH_RESOURCE_NAME": "other"})

    def test_refuses_a_build_compiled_for_another_python(self):
        other = "310" if sys.version_info[:2] != (3, 10) else "311"
        so = f"./aiohttp/_http_parser.cpython-{other}-x86_64-linux-gnu.so"
        with self.assertRaises(Fatal) as e:
            self.run_main({"./handler_api.py": "app = object()\n", so: "elf"}, {"FLASH_RESOURCE_NAME": "api"})
        self.assertEqual(e.exception.code, 2)
        own = f"{sys.version_info[0]}.{sys.version_info[1]}"
        self.assertIn(f"compiled for Python {other[0]}.{other[1:]} (aiohttp/_http_parser.cpython-{other}", str(e.exception))
        self.assertIn(f"this runtime is Python {own}", str(e.exception))

    def test_takes_extensions_of_its_own_python_and_stable_abi(self):
        own = f"{sys.version_info[0]}{sys.version_info[1]}"
        tree = os.path.join(self.tmp.name, "tree")
        os.makedirs(os.path.join(tree, "pkg"))
        for name in (f"a.cpython-{own}-x86_64-linux-gnu.so", "b.abi3.so", "c.so", "cpython-312-notes.txt"):
            open(os.path.join(tree, "pkg", name), "w").close()
        self.assertIsNone(entry.foreign_extension(tree))

    def test_needs_the_resource_name(self):
        with self.assertRaises(Fatal) as e:
            entry.main({})
        self.assertEqual(e.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
