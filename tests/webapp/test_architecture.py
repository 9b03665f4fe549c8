"""The arrows of docs/architecture.md, read from the code's own imports. (That `grading/`
imports nothing of the app, Django or Celery is tests/grading/test_purity.py's.)"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FEATURES = ("batches", "review", "grading", "annotation", "exports", "api", "search", "audit", "runs",
            "evidence")
SHARED = ("models", "roles", "rankings", "advantages", "triage", "cases", "bulk", "jobs", "work", "html", "params",
          "names")
# The only arrows between features, each one way; docs/architecture.md draws the same. A write
# that makes another feature's data stale calls webapp/work.py; the group page, which several
# features show, is composed above them in webapp/grouppage.py.
FEATURE_ARROWS = {("api", "batches"), ("api", "grading"), ("api", "exports"), ("audit", "grading"), ("api", "runs"),
                  ("runs", "exports"), ("runs", "search"), ("grading", "evidence")}


def imports(path: Path) -> set[str]:
    """Every module `path` imports, by dotted name (relative imports do not occur here)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules(folder: str):
    for path in sorted((ROOT / folder).rglob("*.py")):
        yield path.relative_to(ROOT), imports(path)


def under(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_the_web_app_never_imports_the_workers():
    bad = {str(path): sorted(n for n in names if under(n, "workers")) for path, names in modules("webapp")}
    assert {path: names for path, names in bad.items() if names} == {}


def test_workers_call_services_and_the_job_definitions_only():
    allowed = ("webapp.grading.services", "webapp.grading.worker", "webapp.exports.services", "webapp.jobs",
               "webapp.work", "webapp.html.renders", "webapp.search.services", "webapp.audit.services",
               "webapp.runs.services", "webapp.evidence.services")
    bad = {str(path): sorted(n for n in names if under(n, "webapp") and not under(n, *allowed))
           for path, names in modules("workers")}
    assert {path: names for path, names in bad.items() if names} == {}


def test_the_shared_floor_imports_no_feature():
    features = tuple(f"webapp.{f}" for f in FEATURES)
    bad = {}
    for name in SHARED:
        path = ROOT / "webapp" / name
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
        for file in files:
            found = sorted(n for n in imports(file) if under(n, *features))
            if found:
                bad[str(file.relative_to(ROOT))] = found
    assert bad == {}


def test_features_import_one_another_only_along_the_drawn_arrows():
    found = set()
    for feature in FEATURES:
        for _, names in modules(f"webapp/{feature}"):
            found |= {(feature, other) for other in FEATURES if other != feature
                      and any(under(n, f"webapp.{other}") for n in names)}
    assert found == FEATURE_ARROWS
    assert not {(a, b) for a, b in found if (b, a) in found}  # no tie both ways


def test_only_views_import_the_group_page():
    """webapp/grouppage.py composes features' parts; were a feature's reads or writes to import
    it, that feature would import the others through it."""
    bad = sorted(str(path) for path, names in modules("webapp")
                 if any(under(n, "webapp.grouppage") for n in names) and path.name != "views.py")
    assert bad == []


def test_the_work_module_names_tasks_and_shared_models_only():
    names = imports(ROOT / "webapp" / "work.py")
    assert {n for n in names if under(n, "webapp")} <= {"webapp.jobs", "webapp.models"} | {
        n for n in names if n.startswith(("webapp.jobs.", "webapp.models."))}


def test_each_feature_folder_holds_its_views_urls_and_templates():
    for feature in FEATURES:
        folder = ROOT / "webapp" / feature
        assert (folder / "views.py").is_file() and (folder / "urls.py").is_file(), feature
        assert any((folder / "templates" / feature).glob("*.html")), feature
        assert f'include("webapp.{feature}.urls")' in (ROOT / "webapp" / "urls.py").read_text()


def test_nothing_imports_the_api():
    """The API calls the features' services; a page never goes through the API."""
    bad = {str(path): sorted(n for n in names if under(n, "webapp.api"))
           for path, names in modules("webapp") if not path.is_relative_to("webapp/api")}
    assert {path: names for path, names in bad.items() if names} == {}


def test_pages_and_the_api_read_as_their_viewer_never_unrestricted():
    """Views and API endpoints build a Viewer from the request's user; UNRESTRICTED (every
    ranking, whoever asks) is for workers, writers and the command line."""
    front = [*(ROOT / "webapp").rglob("views.py"), ROOT / "webapp" / "api" / "endpoints.py"]
    bad = sorted(str(path.relative_to(ROOT)) for path in front if "UNRESTRICTED" in path.read_text(encoding="utf-8"))
    assert bad == []


def test_only_the_rankings_module_reads_rankings_unfiltered():
    """`webapp.rankings._grader_rankings` skips the visibility rule: nothing else may call it."""
    callers = sorted(str(path) for path, _ in modules("webapp") if path != Path("webapp/rankings.py")
                     and "_grader_rankings" in (ROOT / path).read_text(encoding="utf-8"))
    assert callers == []
