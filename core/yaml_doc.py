"""A YAML document that knows the line of every key, so that every error names the file, the line and the key
(`hosts.yaml:4: nodes[0].port: must be an integer ...`). Suite, scenario and hosts files are read through it."""
from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import yaml

from kchaos.core.config import ConfigError


def option_key(raw: Any) -> str:
    """A key as its argparse dest: `min-insync` and `min_insync` are both `min_insync`."""
    return str(raw).replace("-", "_")


class SpecDoc:
    """Plain data from a YAML document plus the line of every key path; duplicate keys are errors.

    Every problem, from the YAML itself or found later through `fail`, is raised as `error`.
    """

    def __init__(self, path: Path, text: str, error: type[ConfigError]):
        self.file = path.name
        self.dir = Path(path).absolute().parent
        self.error = error
        self.lines: dict[tuple, int] = {}
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
            self.data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"{self.file}:{mark.line + 1}" if mark else self.file
            raise error(f"{where}: not valid YAML: {getattr(e, 'problem', None) or e}") from None
        if node is not None:
            self._walk(node, ())

    def _walk(self, node: yaml.Node, path: tuple) -> None:
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in node.value:
                if k.value in seen:
                    self.fail(path + (k.value,), "appears twice", line=k.start_mark.line + 1)
                seen.add(k.value)
                for key in {k.value, option_key(k.value)}:  # errors name options as min_insync, whatever the spelling
                    self._walk(v, path + (key,))
                    self.lines[path + (key,)] = k.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._walk(v, path + (i,))

    def fail(self, path: tuple, msg: str, line: int | None = None) -> NoReturn:
        """Raise the document's error `file:line: key.path: msg`, with the line of `path` or its nearest parent."""
        if line is None:
            line = next((self.lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in self.lines), 1)
        name = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        raise self.error(f"{self.file}:{line}: {name + ': ' if name else ''}{msg}")
