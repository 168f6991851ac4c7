"""`hf completion bash|zsh`: a completion script written from the argument parser itself, so every command and
flag `hf` has completes, and nothing it does not. Load it with `eval "$(hf completion bash)"` (bash) or
`eval "$(hf completion zsh)"` (zsh, through its bash-completion layer)."""

import argparse


def _words(parser: argparse.ArgumentParser, path: str, table: dict[str, list[str]]) -> None:
    """Per command path ("", "group", "group logs"): the subcommands and flags that may follow it."""
    words = [option for action in parser._actions for option in action.option_strings if option.startswith("--")]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words.append(name)
                _words(sub, f"{path} {name}".strip(), table)
        elif action.choices and not action.option_strings:
            words.extend(map(str, action.choices))
    table[path] = words


_BASH = """# hf completion for bash: eval "$(hf completion bash)"
_hf_complete() {
    local current="${COMP_WORDS[COMP_CWORD]}" path="" word candidate index
    for ((index = 1; index < COMP_CWORD; index++)); do
        word="${COMP_WORDS[index]}"
        candidate="${path:+${path}_}$word"
        case " ${_HF_PATHS[*]} " in *" $candidate "*) path="$candidate" ;; esac
    done
    local words_var="_hf_words_${path:-root}"
    COMPREPLY=($(compgen -W "${!words_var}" -- "$current"))
}
%(tables)s
complete -o default -F _hf_complete hf
"""

_ZSH_PREAMBLE = """# hf completion for zsh: eval "$(hf completion zsh)"
autoload -U +X bashcompinit && bashcompinit
"""


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    table: dict[str, list[str]] = {}
    _words(parser, "", table)
    paths = sorted(path for path in table if path)
    lines = [f"_HF_PATHS=({' '.join(path.replace(' ', '_') for path in paths)})"]
    for path, words in sorted(table.items()):
        key = path.replace(" ", "_") or "root"
        lines.append(f"_hf_words_{key}=\"{' '.join(words)}\"")
    script = _BASH % {"tables": "\n".join(lines)}
    return _ZSH_PREAMBLE + script if shell == "zsh" else script
