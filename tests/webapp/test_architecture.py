"""The arrows of docs/architecture.md, read from the code's own imports, and the data ties:
which feature's raw SQL names which tables, and who imports the derived data's stores. (That
`grading/` imports nothing of the app, Django or Celery is tests/grading/test_purity.py's.)"""

import ast
import re
from pathlib import Path

from django.apps import apps

ROOT = Path(__file__).resolve().parents[2]
FEATURES = ("batches", "review", "grading", "annotation", "exports", "api", "search", "audit", "runs",
            "evidence")
SHARED = ("models", "roles", "rankings", "advantages", "triage", "cases", "bulk", "jobs", "work", "derived", "html",
          "params", "names")
# The only arrows between features, each one way; docs/architecture.md draws the same. A write
# that makes another feature's data stale calls webapp/derived.py; the group page, which several
# features show, is composed above them in webapp/grouppage.py.
FEATURE_ARROWS = {("api", "batches"), ("api", "grading"), ("api", "exports"), ("audit", "grading"), ("api", "runs"),
                  ("runs", "exports"), ("runs", "search"), ("grading", "evidence")}
# Who owns each table, by model (a table without a model, by its name): the feature whose
# services write it and whose selectors read it, or the shared floor (SHARED: "models" for the
# imported rollouts every feature reads, "html" for the render store). A feature's raw SQL
# names only its own tables and the floor's, and a derived data's store (DERIVED_STORES) is
# imported by its owner and the floor only; a new model is given its owner here.
TABLE_OWNERS = {
    # models/rollouts.py
    "Batch": "models", "Group": "models", "Trajectory": "models", "Transcript": "models",
    # models/renders.py
    "PatchRender": "html", "BatchPatch": "html",
    # models/grading.py, and the grading panel's figures (models/runs.py)
    "GradingRun": "grading", "Grading": "grading", "GradingTranscript": "grading", "GradingPanel": "grading",
    # models/annotation.py
    "AnnotationPolicy": "annotation", "Annotation": "annotation", "Lease": "annotation",
    # models/exports.py
    "Export": "exports", "ApiToken": "api",
    # models/audit.py
    "AuditSet": "audit", "AuditItem": "audit", "AuditVerdict": "audit", "GoldGroup": "audit",
    "ReferenceProxy": "audit", "AuditFigures": "audit",
    # models/evidence.py
    "GroupEvidence": "evidence", "EvidenceRun": "evidence", "EvidenceProbe": "evidence",
    # models/runs.py
    "Run": "runs", "RunStep": "runs", "BatchFigures": "runs",
    # models/search.py, and the index itself (no model: webapp/migrations/0010_search_index.py)
    "SearchState": "search", "webapp_search_entry": "search",
}
# Caches that writes make stale and their owner recomputes: webapp/derived.py's kinds'
# stores, the render store's holds, and the audit's reference-fix proxies.
DERIVED_STORES = ("BatchFigures", "GradingPanel", "AuditFigures", "SearchState", "PatchRender", "BatchPatch",
                  "ReferenceProxy")


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
               "webapp.work", "webapp.derived", "webapp.html.renders", "webapp.search.services",
               "webapp.audit.services", "webapp.runs.services", "webapp.evidence.services",
               "webapp.advantages.services")
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


def test_background_work_names_tasks_and_shared_models_only():
    """webapp/work.py and webapp/derived.py, on top of it: features call them, they call no feature."""
    for module, floor in (("work", ("webapp.jobs", "webapp.models")),
                          ("derived", ("webapp.jobs", "webapp.models", "webapp.work"))):
        names = imports(ROOT / "webapp" / f"{module}.py")
        assert all(under(n, *floor) for n in names if under(n, "webapp")), module


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


def owner_of(path: Path) -> str | None:
    """The feature or shared floor module `path` (relative to ROOT) belongs to; None for the
    rest of webapp/ (the group page, the admin, commands, template tags, settings)."""
    top = path.parts[1].removesuffix(".py")
    return top if top in FEATURES or top in SHARED else None


def tables_by_name() -> dict[str, str]:
    """Each table's name in SQL to its key in TABLE_OWNERS."""
    named = {model._meta.db_table: model.__name__ for model in apps.get_app_config("webapp").get_models()}
    return named | {key: key for key in TABLE_OWNERS if key.startswith("webapp_")}


def raw_sql_tables(path: Path) -> set[str]:
    """The tables `path`'s SQL names, as TABLE_OWNERS' keys: `webapp_*` in its strings, and the
    models whose `_meta.db_table` it reads, named there (`Grading._meta.db_table`) or through a
    variable (`_bound_to`). One it cannot tell is "?", so that a new way of naming a table fails."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    by_name = tables_by_name()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= {by_name.get(table, table) for table in re.findall(r"\bwebapp_[a-z0-9_]+", node.value)}
    read = [node.value.value for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and node.attr == "db_table" and isinstance(node.value, ast.Attribute) and node.value.attr == "_meta"]
    names = {expr.id for expr in read if isinstance(expr, ast.Name)}
    if any(not isinstance(expr, ast.Name) for expr in read):
        found.add("?")
    for name in names:
        found |= {name} if name in TABLE_OWNERS else _bound_to(tree, name)
    return found


def _bound_to(tree: ast.Module, variable: str) -> set[str]:
    """The models `variable` holds: the names in the tuple a loop takes it from
    (`m._meta.db_table for m in (Run, RunStep)`), or those passed to the function that takes it
    (`_table(Grading)`); "?" where it holds anything else."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension | ast.For) and isinstance(node.target, ast.Name) \
                and node.target.id == variable:
            out |= {e.id if isinstance(e, ast.Name) else "?" for e in getattr(node.iter, "elts", [None])}
        elif isinstance(node, ast.FunctionDef) and variable in (params := [a.arg for a in node.args.args]):
            at = params.index(variable)
            out |= {call.args[at].id if len(call.args) > at and isinstance(call.args[at], ast.Name) else "?"
                    for call in ast.walk(tree)
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == node.name}
    return out or {"?"}


def test_every_table_has_one_owner():
    models = {model.__name__ for model in apps.get_app_config("webapp").get_models()}
    assert {key for key in TABLE_OWNERS if not key.startswith("webapp_")} == models
    assert set(TABLE_OWNERS.values()) <= set(FEATURES) | set(SHARED)
    assert set(DERIVED_STORES) <= set(TABLE_OWNERS)


def test_a_features_raw_sql_names_its_own_tables_and_the_floors_only():
    """Raw SQL goes past the models' managers: a feature that wrote another's table there
    would tie itself to that table's columns unseen. (The ORM's reads of the floor's models
    are the floor's to allow.)"""
    bad = {}
    for feature in FEATURES:
        for path in sorted((ROOT / "webapp" / feature).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            names = raw_sql_tables(path)
            others = sorted(n for n in names if TABLE_OWNERS.get(n, "?") not in (feature, *SHARED))
            if others:
                bad[relative] = others
    assert bad == {}


def test_the_raw_sql_reader_finds_tables_however_they_are_named():
    """The reader of the test above, on what the app's SQL does: were it to miss a way of
    naming a table, that test would pass whatever the SQL reads."""
    assert raw_sql_tables(ROOT / "webapp/search/services.py") >= {"webapp_search_entry"}
    assert raw_sql_tables(ROOT / "webapp/runs/selectors.py") >= {"RunStep", "Batch", "BatchFigures"}
    assert raw_sql_tables(ROOT / "webapp/grading/sql.py") >= {"Grading", "GradingRun", "Group", "Trajectory"}
    assert raw_sql_tables(ROOT / "webapp/audit/figures.py") >= {"GoldGroup", "AuditVerdict", "Trajectory"}
    assert "?" not in raw_sql_tables(ROOT / "webapp/runs/figures.py")


def test_derived_stores_are_imported_by_their_owner_and_the_floor_only():
    """A derived data's store (a cache its owner recomputes) is read and written by its owner;
    another feature asks the owner's selectors or services, and marks it stale through
    webapp/derived.py."""
    bad = {}
    for path, names in modules("webapp"):
        owner = owner_of(path)
        stores = sorted(store for store in DERIVED_STORES if any(
            under(n, "webapp.models") and n.rsplit(".", 1)[-1] == store for n in names))
        misplaced = [store for store in stores if owner not in (TABLE_OWNERS[store], *SHARED)]
        if misplaced:
            bad[str(path)] = misplaced
    assert bad == {}
