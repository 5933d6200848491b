"""Render (problem, config) into a frozen Triton module through one strict Jinja environment.

Parameters are validated against the search space first; only checked enum values and ints
reach the template, never a free-form string. Same inputs give the same bytes, and a file is
written only when its content changes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import jinja2
import jinja2.meta

from indexer_logits._identity import Config, Problem, variant_name

from . import __version__
from .families import family_of
from .space import check

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


def _env(template_dir: Path | None = None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir or TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["pyrepr"] = lambda json_text: repr(json.loads(json_text))
    return env


def included_partials(name: str, template_dir: Path | None = None) -> list[str]:
    """The partials a template includes or imports, directly or through other partials, sorted."""
    env, seen, todo = _env(template_dir), set(), [name]
    while todo:
        source = env.loader.get_source(env, todo.pop())[0]
        for ref in jinja2.meta.find_referenced_templates(env.parse(source)):
            if ref is None:
                raise ValueError(f"{name}: a template name computed at render time cannot be hashed")
            if ref not in seen:
                seen.add(ref)
                todo.append(ref)
    return sorted(seen)


_HASHES: dict = {}  # (family, template dir, its files' names, sizes and mtimes) -> template_hash


def template_hash(family: str, template_dir: Path | None = None) -> str:
    """sha256 over the family's template and the partials it includes, and nothing else: a
    partial another family alone includes does not change this family's trials.

    Remembered while no template file of the folder changes (name, size, mtime): the model's
    ranking asks for it per compiled point, and each answer parsed every partial."""
    template_dir = Path(template_dir or TEMPLATE_DIR)
    stamp = tuple((p.name, st.st_size, st.st_mtime_ns) for p in sorted(template_dir.glob("*.jinja"))
                  for st in (p.stat(),))
    memo = (family, str(template_dir.resolve()), stamp)
    if memo not in _HASHES:
        main = family_of(family).template
        h = hashlib.sha256()
        for name in [main] + included_partials(main, template_dir):
            h.update(name.encode() + b"\0" + (template_dir / name).read_bytes() + b"\0")
        _HASHES[memo] = h.hexdigest()
    return _HASHES[memo]


def render(problem: Problem, config: Config, template_dir: Path | None = None) -> str:
    """The module text of one variant. template_dir: another set of templates (e.g. a candidate
    template change under experiments/, to time it on the shipped configs before a re-tune)."""
    check(problem, config)
    name = family_of(problem).template
    return _env(template_dir).get_template(name).render(
        problem=problem,
        config=config,
        variant=variant_name(problem, config),
        problem_json=problem.to_json(),
        config_json=config.to_json(),
        template_name=name,
        template_hash=template_hash(problem.family, template_dir),
        tool_version=__version__,
    )


def write_if_different(path: Path, text: str) -> bool:
    """Write text to path unless it already holds exactly that; True when written."""
    path = Path(path)
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return True


def emit(problem: Problem, config: Config, out_dir: Path, template_dir: Path | None = None) -> Path:
    """Render into `<out_dir>/<variant>.py` (from `template_dir`'s templates if given); returns the path."""
    path = Path(out_dir) / f"{variant_name(problem, config)}.py"
    write_if_different(path, render(problem, config, template_dir))
    return path


def load_module(path: Path) -> ModuleType:
    """Import a generated module from its file (Triton needs the source on disk). Cached per file:
    the module name carries a hash of the resolved path, so two files with the same name in
    different folders (e.g. one config rendered from two templates) are two modules."""
    path = Path(path)
    where = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    name = f"_indexer_generated_{path.stem}_{where}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
