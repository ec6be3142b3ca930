"""neuronx-cc compiler arguments: the subset neuron_emu emulates (auto-cast, target), read like the CLI."""

from __future__ import annotations

import shlex
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

from neuron_emu.errors import CompilerArgsError, NeuronEmuWarning

AutoCast = Literal["none", "matmult", "all"]
AutoCastType = Literal["bf16", "fp16", "tf32", "fp8_e4m3"]
Target = Literal["inf2", "trn1", "trn1n"]

AUTO_CAST_VALUES: tuple[str, ...] = ("none", "matmult", "all")
AUTO_CAST_TYPES: tuple[str, ...] = ("bf16", "fp16", "tf32", "fp8_e4m3")
TARGETS: tuple[str, ...] = ("inf2", "trn1", "trn1n")
MODEL_TYPES: tuple[str, ...] = ("generic", "transformer", "unet-inference", "cnn-training")
# Flags accepted and recorded, with no effect on the emulation (they tune the real compiler's output).
_NO_EFFECT_SWITCHES = frozenset(
    {
        "--enable-fast-loading-neuron-binaries",
        "--enable-fast-context-switch",
        "--enable-saturate-infinity",
        "--enable-mixed-precision-accumulation",
        "--distribution-strategy",
    }
)
_NO_EFFECT_VALUES = frozenset({"--logfile", "--verbose", "--output", "--framework", "--workdir", "--logical-nc-config"})


@dataclass(frozen=True)
class CompilerOptions:
    auto_cast: AutoCast = "matmult"
    auto_cast_type: AutoCastType = "bf16"
    target: Target | None = None
    model_type: str = "generic"
    optlevel: int = 2
    no_effect: tuple[str, ...] = field(default_factory=tuple)

    @property
    def casts_matmul(self) -> bool:
        return self.auto_cast in ("matmult", "all")

    @property
    def casts_all(self) -> bool:
        return self.auto_cast == "all"

    def text(self) -> str:
        """The options as a canonical neuronx-cc argument string."""
        parts = [f"--auto-cast {self.auto_cast}"]
        if self.auto_cast != "none":
            parts.append(f"--auto-cast-type {self.auto_cast_type}")
        if self.target:
            parts.append(f"--target {self.target}")
        if self.model_type != "generic":
            parts.append(f"--model-type {self.model_type}")
        parts.append(f"-O{self.optlevel}")
        return " ".join(parts)


def _tokens(args: str | Sequence[str] | None) -> list[str]:
    if args is None:
        return []
    if isinstance(args, str):
        try:
            return shlex.split(args)
        except ValueError as exc:
            raise CompilerArgsError(f"cannot split compiler_args {args!r}: {exc}") from None
    tokens: list[str] = []
    for item in args:
        if not isinstance(item, str):
            raise CompilerArgsError(f"compiler_args must be strings, got {item!r}")
        tokens.extend(shlex.split(item) if " " in item.strip() else [item])
    return tokens


def _choice(flag: str, value: str, choices: Sequence[str], aliases: dict[str, str] | None = None) -> str:
    value = (aliases or {}).get(value, value)
    if value not in choices:
        raise CompilerArgsError(f"{flag} {value!r} is not one of: {', '.join(choices)}")
    return value


def parse_compiler_args(args: str | Sequence[str] | None) -> CompilerOptions:
    """Read neuronx-cc arguments (a string or a list, `--flag value` or `--flag=value`); later flags win."""
    tokens = _tokens(args)
    values: dict[str, str] = {}
    no_effect: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        flag, eq, inline = token.partition("=")
        if flag.startswith("-O") and flag[2:].isdigit() and not eq:
            values["--optlevel"] = flag[2:]
            continue
        if not flag.startswith("-"):
            raise CompilerArgsError(f"unexpected compiler argument {token!r} (flags start with --)")
        takes_value = flag in {"--auto-cast", "--auto-cast-type", "--target", "--model-type", "--optlevel"}
        if takes_value or flag in _NO_EFFECT_VALUES:
            if eq:
                value = inline
            elif i < len(tokens):
                value = tokens[i]
                i += 1
            else:
                raise CompilerArgsError(f"{flag} needs a value")
            if takes_value:
                values[flag] = value
            else:
                no_effect.append(f"{flag} {value}")
            continue
        if flag in _NO_EFFECT_SWITCHES:
            no_effect.append(token)
            continue
        # Unknown to the emulator: keep going like a newer compiler would, but say so.
        if not eq and i < len(tokens) and not tokens[i].startswith("-"):
            token = f"{token} {tokens[i]}"
            i += 1
        warnings.warn(
            f"neuron_emu does not emulate compiler flag {token!r}; ignoring it",
            NeuronEmuWarning,
            stacklevel=3,
        )
        no_effect.append(token)
    auto_cast = _choice("--auto-cast", values.get("--auto-cast", "matmult"), AUTO_CAST_VALUES, {"matmul": "matmult"})
    cast_type = _choice("--auto-cast-type", values.get("--auto-cast-type", "bf16"), AUTO_CAST_TYPES)
    target = _choice("--target", values["--target"], TARGETS) if "--target" in values else None
    model_type = values.get("--model-type", "generic")
    if model_type not in MODEL_TYPES:
        raise CompilerArgsError(f"--model-type {model_type!r} is not one of: {', '.join(MODEL_TYPES)}")
    optlevel_text = values.get("--optlevel", "2")
    if optlevel_text not in ("1", "2", "3"):
        raise CompilerArgsError(f"--optlevel {optlevel_text!r} is not one of: 1, 2, 3")
    return CompilerOptions(
        auto_cast=cast(AutoCast, auto_cast),
        auto_cast_type=cast(AutoCastType, cast_type),
        target=cast(Target | None, target),
        model_type=model_type,
        optlevel=int(optlevel_text),
        no_effect=tuple(no_effect),
    )
