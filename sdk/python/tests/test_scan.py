"""The scanner (gantry/scan.py): resources read from source, errors with file and line, ignore rules."""

import json
import os
import subprocess
import sys
import unittest

from support import SCAN_PY, temp_project

from gantry import scan

GPU_WORKER = '''
from gantry import endpoint

@endpoint(name="gpu-worker", gpu=["ADA_24"], gpu_count=1, workers=(0, 3), idle_timeout=5,
          dependencies=["pillow==11.3.0"], env={"MODEL": "tiny"}, scaler="QUEUE_DELAY", scaler_value=4)
def generate(prompt: str, steps: int = 20) -> dict:
    """Draws the prompt.

    More words that are not the summary.
    """
    return {"image": prompt * steps}
'''

CPU_WORKER = '''
from gantry import endpoint


@endpoint(name="cpu-worker", cpu="cpu3c-2-4")
def add(a: int, b: int) -> dict:
    """Adds two numbers."""
    return {"sum": a + b}
'''

LB_WORKER = '''
from gantry import Endpoint

api = Endpoint(name="api", cpu="cpu3c-2-4", workers=(1, 3))


@api.post("/process")
def process(body: dict) -> dict:
    """Processes a body."""
    return {"got": body}


@api.get("/health")
def health() -> dict:
    return {"ok": True}
'''


def run_scan(root, *extra):
    """Runs scan.py as the CLI does: a bare file, no install, nothing on PYTHONPATH."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    r = subprocess.run([sys.executable, "-I", SCAN_PY, *extra, root], capture_output=True, text=True, env=env, cwd="/")
    if r.returncode != 0:
        raise AssertionError(f"scan.py exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


class TemplateShapes(unittest.TestCase):
    def test_the_three_templates(self):
        root = temp_project(self, {"gpu_worker.py": GPU_WORKER, "cpu_worker.py": CPU_WORKER, "lb_worker.py": LB_WORKER})
        out = run_scan(root)
        self.assertEqual(out["errors"], [])
        by_name = {r["name"]: r for r in out["resources"]}
        self.assertEqual(sorted(by_name), ["api", "cpu-worker", "gpu-worker"])
        self.assertEqual(by_name["gpu-worker"], {
            "name": "gpu-worker", "kind": "queue", "file": "gpu_worker.py", "line": 3,
            "function": "generate", "summary": "Draws the prompt.",
            "params": [{"name": "prompt", "annotation": "str", "required": True},
                       {"name": "steps", "annotation": "int", "required": False, "default": 20}],
            "compute": {"gpu": {"pools": ["ADA_24"], "count": 1}},
            "workers": {"min": 0, "max": 3}, "idleTimeout": 5,
            "scaler": {"type": "QUEUE_DELAY", "value": 4}, "timeout": 600,
            "env": {"MODEL": "tiny"}, "dependencies": ["pillow==11.3.0"], "pythonVersion": None,
        })
        self.assertEqual(by_name["cpu-worker"], {
            "name": "cpu-worker", "kind": "queue", "file": "cpu_worker.py", "line": 4,
            "function": "add", "summary": "Adds two numbers.",
            "params": [{"name": "a", "annotation": "int", "required": True},
                       {"name": "b", "annotation": "int", "required": True}],
            "compute": {"cpu": "cpu3c-2-4"},
            "workers": {"min": 0, "max": 3}, "idleTimeout": 5,
            "scaler": {"type": "QUEUE_DELAY", "value": 4}, "timeout": 600,
            "env": {}, "dependencies": [], "pythonVersion": None,
        })
        self.assertEqual(by_name["api"], {
            "name": "api", "kind": "lb", "file": "lb_worker.py", "line": 3, "object": "api",
            "routes": [{"method": "POST", "path": "/process", "function": "process", "summary": "Processes a body."},
                       {"method": "GET", "path": "/health", "function": "health", "summary": None}],
            "compute": {"cpu": "cpu3c-2-4"},
            "workers": {"min": 1, "max": 3}, "idleTimeout": 5,
            "scaler": {"type": "REQUEST_COUNT", "value": 4}, "timeout": 600,
            "env": {}, "dependencies": [], "pythonVersion": None,
        })

    def test_the_decorators_record_what_the_scanner_reads(self):
        # Importing the same files gives the same configuration the scanner found.
        root = temp_project(self, {"gpu_worker.py": GPU_WORKER, "lb_worker.py": LB_WORKER})
        scanned = {r["name"]: r for r in scan.scan_project(root)["resources"]}
        sys.path.insert(0, root)
        self.addCleanup(sys.path.remove, root)
        import gpu_worker  # noqa: E402
        import lb_worker  # noqa: E402
        recorded = gpu_worker.generate.__gantry__
        for k in ("name", "kind", "function", "compute", "workers", "idleTimeout", "scaler", "timeout", "env", "dependencies", "pythonVersion"):
            self.assertEqual(recorded[k], scanned["gpu-worker"][k], k)
        self.assertEqual(gpu_worker.generate("x", 2), {"image": "xx"})  # the function is unchanged
        self.assertEqual(lb_worker.api.name, "api")
        self.assertEqual(list(lb_worker.api.routes), [("POST", "/process"), ("GET", "/health")])
        for k, v in lb_worker.api.config.items():
            self.assertEqual(scanned["api"][k], v, k)

    def test_defaults_and_python_version(self):
        root = temp_project(self, {"w.py": '''
            from gantry import endpoint
            @endpoint("tiny", python_version="3.13", timeout=30, gpu="AMPERE_16", gpu_count=2, scaler="REQUEST_COUNT", scaler_value=2)
            async def run(*, text: "str" = "hi", n=(1, 2), other=len, **rest):
                pass
        '''})
        (r,) = run_scan(root)["resources"]
        self.assertEqual(r["compute"], {"gpu": {"pools": ["AMPERE_16"], "count": 2}})
        self.assertEqual(r["pythonVersion"], "3.13")
        self.assertEqual(r["timeout"], 30)
        self.assertEqual(r["scaler"], {"type": "REQUEST_COUNT", "value": 2})
        self.assertIsNone(r["summary"])
        self.assertEqual(r["params"], [
            {"name": "text", "annotation": "'str'", "required": False, "default": "hi"},
            {"name": "n", "annotation": None, "required": False, "default": [1, 2]},
            {"name": "other", "annotation": None, "required": False},  # computed default: nothing to show
        ])


class Recognition(unittest.TestCase):
    def test_aliases_and_module_imports(self):
        root = temp_project(self, {
            "a.py": '''
                from gantry import endpoint as ep, Endpoint as E
                @ep(name="alias-fn")
                def f(): pass
                web = E(name="alias-lb")
                @web.put("/x")
                def put_x(body): pass
            ''',
            "b.py": '''
                import gantry
                import gantry as g
                @gantry.endpoint(name="module-fn")
                def f(): pass
                @g.endpoint(name="module-alias-fn")
                def h(): pass
                svc: g.Endpoint = g.Endpoint(name="module-lb")
                @svc.delete("/items")
                def remove(query): pass
            ''',
            "c.py": '''
                # Not gantry's: another library's decorators with the same names are left alone.
                from other import endpoint
                from flask import Flask
                app = Flask(__name__)
                @endpoint(name="not-ours")
                def f(): pass
                @app.get("/x")
                def g(): pass
            ''',
        })
        out = run_scan(root)
        self.assertEqual(out["errors"], [])
        found = {r["name"]: r for r in out["resources"]}
        self.assertEqual(sorted(found), ["alias-fn", "alias-lb", "module-alias-fn", "module-fn", "module-lb"])
        self.assertEqual(found["alias-lb"]["routes"], [{"method": "PUT", "path": "/x", "function": "put_x", "summary": None}])
        self.assertEqual(found["module-lb"]["object"], "svc")
        self.assertEqual(found["module-lb"]["routes"][0]["method"], "DELETE")

    def test_files_are_listed_relative_and_in_subdirectories(self):
        root = temp_project(self, {"pkg/deep/w.py": 'from gantry import endpoint\n@endpoint(name="deep")\ndef f(): pass\n'})
        (r,) = run_scan(root)["resources"]
        self.assertEqual((r["file"], r["line"]), ("pkg/deep/w.py", 2))


class Errors(unittest.TestCase):
    def errors(self, files):
        out = run_scan(temp_project(self, files))
        return out["errors"], out["resources"]

    def test_non_literal_arguments_name_file_and_line(self):
        errors, resources = self.errors({"w.py": '''
            from gantry import endpoint
            POOLS = ["ADA_24"]

            @endpoint(name="w",
                      gpu=POOLS)
            def f(): pass

            opts = {}
            @endpoint(name="v", **opts)
            def g(): pass
        '''})
        self.assertEqual(resources, [])
        self.assertEqual([(e["file"], e["line"]) for e in errors], [("w.py", 5), ("w.py", 9)])
        self.assertIn("'gpu' must be a literal", errors[0]["message"])
        self.assertIn("POOLS", errors[0]["message"])
        self.assertIn("**kwargs", errors[1]["message"])

    def test_syntax_error_names_file_and_line(self):
        errors, resources = self.errors({
            "ok.py": 'from gantry import endpoint\n@endpoint(name="fine")\ndef f(): pass\n',
            "sub/broken.py": "from gantry import endpoint\n\ndef f(:\n    pass\n",
        })
        self.assertEqual([r["name"] for r in resources], ["fine"])
        self.assertEqual(len(errors), 1)
        self.assertEqual((errors[0]["file"], errors[0]["line"]), ("sub/broken.py", 3))
        self.assertIn("SyntaxError", errors[0]["message"])

    def test_duplicate_names(self):
        errors, resources = self.errors({
            "a.py": 'from gantry import endpoint\n@endpoint(name="same")\ndef f(): pass\n',
            "b.py": 'from gantry import Endpoint\nx = Endpoint(name="same")\n@x.get("/")\ndef root(): pass\n',
            "c.py": 'from gantry import Endpoint\nlonely = Endpoint(name="lonely")\n',
        })
        self.assertEqual([r["name"] for r in resources], ["same"])
        self.assertEqual([(e["file"], e["line"]) for e in errors], [("b.py", 2), ("c.py", 2)])
        self.assertIn("already used at a.py:2", errors[0]["message"])
        self.assertIn("has no routes", errors[1]["message"])

    def test_invalid_configurations(self):
        cases = {
            '@endpoint(name="Bad_Name")': "must be 1-40 characters",
            '@endpoint(name="x", gpu=["ADA_24"], cpu="cpu3c-2-4")': "not both",
            '@endpoint(name="x", cpu="big")': "flavor-vcpus-memoryGb",
            '@endpoint(name="x", workers=(3, 1))': "0 <= min <= max",
            '@endpoint(name="x", idle_timeout=0)': "idle_timeout",
            '@endpoint(name="x", scaler="FAST")': "scaler must be one of",
            '@endpoint(name="x", python_version=3.11)': "python_version",
            '@endpoint(name="x", gpu_count=2)': "gpu_count needs gpu",
            '@endpoint(name="x", colour="red")': "unknown argument 'colour'",
            '@endpoint(name="x", env={"A": 1})': "env must map",
            '@endpoint(name="x", env={"RUNPOD_POD_ID": "1", "PORT": "8"})': "cannot set PORT, RUNPOD_POD_ID",
            '@endpoint(name="x", gpu="ADA_24", gpu_count=9)': "from 1 to 8",
            '@endpoint(name="x", timeout=100000)': "from 5 to 86400",
            '@endpoint(gpu=["ADA_24"])': "needs name",
            '@endpoint': "needs arguments",
        }
        for deco, message in cases.items():
            with self.subTest(deco):
                errors, resources = self.errors({"w.py": f"from gantry import endpoint\n{deco}\ndef f(): pass\n"})
                self.assertEqual(resources, [])
                self.assertEqual(len(errors), 1, errors)
                self.assertEqual(errors[0]["line"], 2)
                self.assertIn(message, errors[0]["message"])

    def test_load_balanced_mistakes(self):
        errors, resources = self.errors({"w.py": '''
            from gantry import Endpoint
            api = Endpoint(name="api", scaler="QUEUE_DELAY")
            web = Endpoint(name="web")
            @web.post("process")
            def a(body): pass
            @web.get("/ping")
            def b(): pass
            @web.get("/two")
            def c(x, y): pass
            @web.get("/ok")
            def d(): pass
            @web.get("/ok")
            def e(): pass
            def make():
                return Endpoint(name="inner")
        '''})
        self.assertEqual([r["name"] for r in resources], ["web"])
        self.assertEqual(resources[0]["routes"], [{"method": "GET", "path": "/ok", "function": "d", "summary": None}])
        got = [(e["line"], e["message"]) for e in errors]
        self.assertEqual([line for line, _ in got], [2, 4, 6, 9, 12, 15])
        for (line, message), expected in zip(got, ["REQUEST_COUNT only", "must start with '/'", "reserved", "at most one parameter",
                                                   "defined twice", "module-level name"]):
            self.assertIn(expected, message, line)

    def test_nested_and_positional_only_functions(self):
        errors, _ = self.errors({"w.py": '''
            from gantry import endpoint
            def outer():
                @endpoint(name="inner")
                def f(): pass
            @endpoint(name="posonly")
            def g(a, /, b): pass
        '''})
        self.assertEqual([e["line"] for e in errors], [3, 6])
        self.assertIn("module level", errors[0]["message"])
        self.assertIn("positional-only", errors[1]["message"])

    def test_the_decorator_raises_the_same_errors_at_import(self):
        import gantry
        with self.assertRaisesRegex(gantry.ConfigError, "not both"):
            gantry.endpoint(name="x", gpu="ADA_24", cpu="cpu3c-2-4")
        with self.assertRaisesRegex(gantry.ConfigError, "needs arguments"):
            gantry.endpoint(lambda: None)
        with self.assertRaisesRegex(gantry.ConfigError, "REQUEST_COUNT only"):
            gantry.Endpoint(name="api", scaler="QUEUE_DELAY")
        api = gantry.Endpoint(name="api")
        with self.assertRaisesRegex(gantry.ConfigError, "at most one parameter"):
            api.post("/x")(lambda a, b: None)
        api.get("/y")(lambda: None)
        with self.assertRaisesRegex(gantry.ConfigError, "defined twice"):
            api.get("/y")
        with self.assertRaisesRegex(gantry.ConfigError, "positional-only"):
            exec("def f(a, /): pass", ns := {})
            gantry.endpoint(name="p")(ns["f"])

    def test_usage_errors(self):
        r = subprocess.run([sys.executable, SCAN_PY, "/nonexistent-dir"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a directory", r.stderr)


class IgnoreRules(unittest.TestCase):
    def check(self, lines, cases):
        rules = scan.IgnoreRules(lines)
        for (path, is_dir), expected in cases.items():
            with self.subTest(lines=lines, path=path, is_dir=is_dir):
                self.assertEqual(rules.ignored(path, is_dir), expected)

    def test_patterns(self):
        self.check(["build/"], {("build", True): True, ("build", False): False, ("a/build", True): True})
        self.check(["*.log"], {("x.log", False): True, ("a/b/x.log", False): True, ("x.logs", False): False})
        self.check(["secret.txt"], {("secret.txt", False): True, ("a/secret.txt", False): True, ("secret.txt.bak", False): False})
        self.check(["/top.txt"], {("top.txt", False): True, ("a/top.txt", False): False})
        self.check(["docs/*.md"], {("docs/a.md", False): True, ("docs/sub/a.md", False): False, ("x/docs/a.md", False): False})
        self.check(["**/cache"], {("cache", True): True, ("a/b/cache", False): True})
        self.check(["a/**/z"], {("a/z", False): True, ("a/b/c/z", False): True, ("b/a/z", False): False})
        self.check(["out/**"], {("out", True): False, ("out/x", False): True, ("out/x/y", False): True})
        self.check(["*.py", "!keep.py"], {("drop.py", False): True, ("keep.py", False): False, ("d/keep.py", False): False})
        self.check(["data?.bin", "[abc].txt", "[!x]y"], {("data1.bin", False): True, ("data12.bin", False): False,
                                                         ("b.txt", False): True, ("d.txt", False): False,
                                                         ("ay", False): True, ("xy", False): False})
        self.check(["# comment", "", "\\#hash", "\\!bang", "trailing   "], {("#hash", False): True, ("!bang", False): True,
                                                                          ("trailing", False): True, ("# comment", False): False})

    def test_always_ignored(self):
        # Cannot be re-included: they are never part of a deployed project.
        self.check(["!.env", "!node_modules/"], {(".env", False): True, ("node_modules", True): True, ("a/__pycache__", True): True,
                                                 ("venv", True): True, (".venv/lib/x.py", False): True, (".git", True): True,
                                                 (".gantry", True): True, ("envy", True): False})

    def test_project_files_and_the_files_flag(self):
        root = temp_project(self, {
            ".gantryignore": "# build output\ndist/\n*.ckpt\n/notes.md\nassets/**\n!assets/keep.png\nlogs/\n!logs/important.txt\n",
            "main.py": "print(1)\n",
            "notes.md": "x", "sub/notes.md": "y",
            "model.ckpt": "z", "sub/w.ckpt": "z",
            "dist/out.py": "x",
            "assets/a.png": "x", "assets/keep.png": "x",
            "logs/important.txt": "cannot come back: its directory is ignored",
            ".env": "SECRET=1", ".venv/bin/python": "x", "pkg/__pycache__/m.pyc": "x",
            "node_modules/a/index.js": "x", ".git/HEAD": "x",
            "README": "x",
        })
        os.symlink("/etc/hostname", os.path.join(root, "outside-link"))
        os.symlink("main.py", os.path.join(root, "inside-link.py"))
        expected = [".gantryignore", "README", "assets/keep.png", "inside-link.py", "main.py", "sub/notes.md"]
        self.assertEqual(scan.project_files(root), expected)
        self.assertEqual(run_scan(root, "--files"), {"files": expected})
        # The scanner reads only the .py files that pass.
        self.assertEqual(run_scan(root)["errors"], [])


if __name__ == "__main__":
    unittest.main()
