"""What the shell completion scripts (`inference-platform completion <shell>`, made by shtab from the
parser) complete beyond the parser's own commands, options and choices: the stack names `--stack`
takes, from the stack files in the working directory (`Pulumi.<stack>.yaml`, as the commands read
them). Plain text, imported by the parser: nothing heavy."""

from __future__ import annotations

STACKS_FUNCTION = "_inference_platform_stacks"
"""The shell function each script defines: the stacks whose files are in the working directory."""

_BASH = f"""
# The stacks whose files are in the working directory (Pulumi.<stack>.yaml), for --stack; $1 is the word so far.
{STACKS_FUNCTION}() {{
  local file stack stacks=()
  for file in Pulumi.*.yaml; do
    [[ -f $file ]] || continue
    stack=${{file#Pulumi.}}
    stacks+=("${{stack%.yaml}}")
  done
  compgen -W "${{stacks[*]}}" -- "$1"
}}
"""

_ZSH = f"""
# The stacks whose files are in the working directory (Pulumi.<stack>.yaml), for --stack.
{STACKS_FUNCTION}() {{
  local -a stacks
  stacks=(Pulumi.*.yaml(N-.))
  stacks=(${{${{stacks#Pulumi.}}%.yaml}})
  compadd -a stacks
}}
"""

_FISH = f"""
# The stacks whose files are in the working directory (Pulumi.<stack>.yaml), for --stack.
function {STACKS_FUNCTION}
  for file in Pulumi.*.yaml
    test -f $file; and string replace -r '^Pulumi\\.(.+)\\.yaml$' '$1' -- $file
  end
end
"""

STACKS: dict[str, str | dict[str, str]] = {
    "bash": STACKS_FUNCTION,
    "zsh": STACKS_FUNCTION,
    "fish": f"({STACKS_FUNCTION})",
    "preamble": {"bash": _BASH, "zsh": _ZSH, "fish": _FISH},
}
"""shtab's custom completion of an option (its `.complete`): a function per shell, and its definition."""
