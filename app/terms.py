"""The words of a text for the full-text index and for a question: Chinese segmented by jieba, the rest as written."""

from __future__ import annotations

import re
import unicodedata

import rjieba

# A word is a run of letters and digits: both databases' tokenizers (FTS5's unicode61, PostgreSQL's parser) then
# keep each word the index stores whole, so they count the same words (jieba also returns spaces, punctuation and
# tokens such as "zx-4471" or "3.14", which each tokenizer would cut its own way).
WORD = re.compile(r"[^\W_]+")
# Runs of Chinese characters (CJK ideographs), whose neighbouring pairs are indexed beside jieba's words.
CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")
# Words too common to tell passages apart; left out of questions (the index keeps them: BM25 weighs them down).
ENGLISH_STOPWORDS = (
    "a an and are as at be but by can could did do does for from had has have how i if in into is it its me my "
    "no not of on or our so than that the their them then there these they this to was we were what when where "
    "which who why will with would you your about tell say said says text document file please"
)
CHINESE_STOPWORDS = (
    "的 了 是 在 和 与 及 或 也 就 都 而 着 吗 呢 吧 啊 呀 我 你 他 她 它 我们 你们 他们 这 那 这个 那个 "
    "什么 怎么 怎样 如何 哪 哪个 哪些 为什么 一个 有 没有 说 讲 提到 文中 文章 文件 关于 请 一下"
)
STOPWORDS = frozenset(f"{ENGLISH_STOPWORDS} {CHINESE_STOPWORDS}".split())
# Characters that make a pair of neighbours no word (为什, 么我, 我的): such pairs are in nearly every passage.
STOP_CHARACTERS = frozenset("的了吗呢吧啊呀么什我你他她它这那哪怎")
# The most words a search looks for: a long pasted question would otherwise match everything.
MOST_QUERY_TERMS = 64
# A word of the question before counts this much of one of the question's own: it keeps a follow-up on its subject
# without outranking what the follow-up asks.
EARLIER_WEIGHT = 0.5


def words(text: str) -> list[str]:
    """The text's words, lower case, full-width forms folded; Chinese runs cut into words, then into pairs too."""
    folded = unicodedata.normalize("NFKC", text).lower()
    # jieba's tokens joined by a space (no word character) are cut at the same places as each token on its own.
    segmented = WORD.findall(" ".join(rjieba.cut_for_search(folded)))
    pairs = [run[i : i + 2] for run in CJK_RUN.findall(folded) for i in range(len(run) - 1)]
    return segmented + [pair for pair in pairs if STOP_CHARACTERS.isdisjoint(pair)]


def indexed(text: str) -> str:
    """What the index stores of a passage: its words, separated by spaces."""
    return " ".join(words(text))


def query_terms(*texts: str) -> dict[str, float]:
    """The words the texts' search looks for, each with its weight: the first text's 1, the others' less.

    The texts share the cap on words fairly: each gets an equal part, and the part one leaves unused goes to the
    others, so a long question still leaves the question before it its words.
    """
    each = [list(dict.fromkeys(word for word in words(text) if word not in STOPWORDS)) for text in texts]
    terms: dict[str, float] = {}
    for index, (found, share) in enumerate(zip(each, shares([len(found) for found in each]), strict=True)):
        for word in found[:share]:
            terms.setdefault(word, 1.0 if index == 0 else EARLIER_WEIGHT)
    return terms


def shares(wanted: list[int]) -> list[int]:
    """How many words each text gets of MOST_QUERY_TERMS: the smallest wants served first, each at most its part."""
    given, left = [0] * len(wanted), MOST_QUERY_TERMS
    for served, index in enumerate(sorted(range(len(wanted)), key=lambda i: wanted[i])):
        given[index] = min(wanted[index], left // (len(wanted) - served))
        left -= given[index]
    return given
