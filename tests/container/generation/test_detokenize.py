"""Streamed text never splits a character, keeps SentencePiece's word spaces, and adds up to the whole answer."""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from container.generation.detokenize import Decode, Detokenizer

TEXT = "Naïve café owners say: «ça marche» ✓ 🎉 über straße."


def _byte_level_bpe() -> Tokenizer:
    """A real byte-level BPE (GPT-2's scheme), trained here on a few lines: tokens split UTF-8 characters."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(["the cat sat on the mat", "owners say it works", "the café"] * 20, trainer)
    return tokenizer


def _stream(decode: Decode, prompt: Sequence[int], generated: Sequence[int]) -> tuple[list[str], str]:
    detokenizer = Detokenizer(decode, prompt)
    pieces = [detokenizer.push(token) for token in generated]
    pieces.append(detokenizer.flush())
    return pieces, detokenizer.text


def test_byte_level_tokens_release_whole_characters_only() -> None:
    tokenizer = _byte_level_bpe()
    prompt = tokenizer.encode("Story: ").ids
    generated = tokenizer.encode(TEXT).ids
    assert len(generated) > len(TEXT) // 2  # multi-byte characters really are split over tokens

    def decode(ids: Sequence[int]) -> str:
        return tokenizer.decode(list(ids))

    pieces, text = _stream(decode, prompt, generated)
    assert "".join(pieces) == text == TEXT
    assert not any("\ufffd" in piece for piece in pieces)
    assert sum(1 for piece in pieces if piece == "") >= 3  # held while a character was incomplete


def test_sentencepiece_word_spaces_survive_token_by_token() -> None:
    """SentencePiece drops the leading space of the first token it decodes ("▁world" alone is "world")."""
    vocab = ["▁Once", "▁upon", "▁a", "▁time", ",", "▁there"]

    def decode(ids: Sequence[int]) -> str:
        return "".join(vocab[i] for i in ids).replace("▁", " ").removeprefix(" ")

    pieces, text = _stream(decode, [0, 1], [2, 3, 4, 5])
    assert pieces == [" a", " time", ",", " there", ""]
    assert text == " a time, there"


def test_an_unfinished_character_at_the_end_is_released_as_unstreamed_decoding_would() -> None:
    table = {0: b"ok ", 1: "é".encode()[:1]}

    def decode(ids: Sequence[int]) -> str:
        return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")

    pieces, text = _stream(decode, [], [0, 1])
    assert pieces == ["ok ", "", "\ufffd"] and text == "ok \ufffd"
