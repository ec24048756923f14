"""The words of a text for the full-text index and for a question: Chinese segmented by jieba, the rest as written."""

from __future__ import annotations

import re
import unicodedata

import rjieba

# A token worth indexing holds a letter or a digit (jieba also returns spaces and punctuation as tokens).
WORDLIKE = re.compile(r"[^\W_]")
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
# The most words a question brings to the index: a long pasted question would otherwise match everything.
MOST_QUERY_TERMS = 64


def words(text: str) -> list[str]:
    """The text's words, lower case, full-width forms folded; Chinese runs cut into words, then into pairs too."""
    folded = unicodedata.normalize("NFKC", text).lower()
    segmented = [token.strip() for token in rjieba.cut_for_search(folded) if WORDLIKE.search(token)]
    return segmented + [run[i : i + 2] for run in CJK_RUN.findall(folded) for i in range(len(run) - 1)]


def indexed(text: str) -> str:
    """What the index stores of a passage: its words, separated by spaces."""
    return " ".join(words(text))


def query_terms(*texts: str) -> list[str]:
    """The distinct words of the texts a search looks for, the first text's first; stopwords left out."""
    seen: dict[str, None] = {}
    for text in texts:
        for word in words(text):
            if word not in STOPWORDS:
                seen.setdefault(word)
    return list(seen)[:MOST_QUERY_TERMS]
