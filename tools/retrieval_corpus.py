"""Documents with known answers for measuring passage retrieval (recall@k), built offline from installed text."""

from __future__ import annotations

import platform
import random
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from pydoc_data.topics import topics as PYDOC_TOPICS

PAGE_CHARS = 3000
# A few thousand words per English document: small help topics are gathered until a document is this long.
DOCUMENT_CHARS = 20000
# Several messages to a Chinese paragraph: one short line alone would read as a heading to a splitter.
PARAGRAPH_CHARS = 400
# Debian's postgresql packages (tools/install_services.sh) ship these human translations of PostgreSQL's messages.
CATALOGS = Path("/usr/share/locale/zh_CN/LC_MESSAGES")
BLANK_LINES = re.compile(r"\n[ \t]*\n+")
BULLET = re.compile(r"(?:[*-]|\d+\.|\(\d+\)) ")
CJK = re.compile(r"[\u4e00-\u9fff]")
CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
ENGLISH_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
CHINESE_END = re.compile(r"(?<=[。！？；])")
WORD = re.compile(r"[A-Za-z_][\w'’]*")
PROSE = re.compile(r"[A-Z][^<>{}|=\n]*[a-z)\"”]\.")
# Version notes differ only in a number: a question could not tell them apart.
NOTES = ("New in version", "Changed in version", "Deprecated since")
# Words of one or two letters are never content words; these longer ones are not either.
ENGLISH_STOPWORDS = (
    "about after all also and any are because been before being both but can could did does each else for from had "
    "has have here how however into its may might more most must not now one only other our out over same see should "
    "some such than that the their them then there these they this those thus under upon use used uses using very was "
    "way were what when where whether which while who why will with within without would you your"
)
STOPWORDS = frozenset(ENGLISH_STOPWORDS.split())
# Without a segmenter, function words and non-Chinese text are where a Chinese phrase visibly ends; these
# prepositions and measure words open one ("在数据库", "%d个参数") and are dropped from its start.
PARTICLES = re.compile("[的了和与及或是把被但也都就而]")
PREPOSITIONS = "在为从将于以个"
ENGLISH_TEMPLATES = (
    "What does the text say about {}?|Which part explains {}?|What was that part about {}?|"
    "Can you find what it says about {}?|I remember something about {}. What exactly?"
)
CHINESE_TEMPLATES = (
    "文中关于{}是怎么说的？|哪里提到了{}？|{}那部分讲的是什么？|关于{}，文档里写了什么？|我记得有一段讲{}，具体怎么说？"
)


@dataclass(frozen=True)
class Document:
    """A named document, one string per page."""

    name: str
    pages: list[str]


@dataclass(frozen=True)
class Question:
    """A question as a person types it, the sentence that answers it and the document that sentence is in."""

    text: str
    answer: str
    document: str


@dataclass(frozen=True)
class Corpus:
    """Documents in one language, questions whose answers each occur exactly once in them, and their origin."""

    language: str
    documents: list[Document]
    questions: list[Question]
    source: str


def corpus(language: str, *, questions: int = 100, seed: int = 0) -> Corpus:
    """The corpus in `language` ("en" or "zh") with `questions` questions drawn deterministically from `seed`."""
    if language == "en":
        documents, origin = english_documents()
        how = "4-7 content words of the sentence in an English question"
    elif language == "zh":
        documents, origin = chinese_documents()
        how = "2-3 phrases of the sentence in a Chinese question"
    else:
        raise ValueError(f"no corpus in {language!r}: 'en' or 'zh'")
    asked = pick(documents, language, questions, random.Random(seed))
    source = f"{origin}; questions: {how}, each answered by a sentence found once in the corpus (seed {seed})"
    return Corpus(language, documents, asked, source)


def english_documents() -> tuple[list[Document], str]:
    """Python's own help topics (pydoc_data: the reference manual as plain text), gathered into documents."""
    seen: set[str] = set()
    kept: dict[str, list[str]] = {}
    # Largest first: some topics are sections of bigger ones, and the whole is the one to keep.
    for key in sorted(PYDOC_TOPICS, key=lambda k: (-len(PYDOC_TOPICS[k]), k)):
        blocks = [unwrap(block) for block in BLANK_LINES.split(PYDOC_TOPICS[key].strip()) if block.strip()]
        long = [block for block in blocks if len(block) > 60]  # "Note:" and the like repeat in topics of their own
        if sum(block in seen for block in long) * 2 <= len(long):
            seen.update(long)
            kept[key] = blocks
    size = {key: sum(map(len, blocks)) for key, blocks in kept.items()}
    # Small topics are gathered (in name order, so related ones meet) until a document is a few thousand words.
    groups: list[list[str]] = [[]]
    for key in sorted(kept, key=lambda k: (size[k] >= DOCUMENT_CHARS, k)):
        if sum(size[k] for k in groups[-1]) >= DOCUMENT_CHARS or size[key] >= DOCUMENT_CHARS:
            groups.append([])
        groups[-1].append(key)
    documents = [
        Document(
            f"python-{'-to-'.join(dict.fromkeys((group[0], group[-1])))}.txt",
            gather([b for k in group for b in kept[k]], PAGE_CHARS, "\n\n"),
        )
        for group in groups
        if group
    ]
    origin = (
        f"Python {platform.python_version()}'s pydoc_data.topics (the reference manual behind help(), shipped with "
        f"CPython): {len(kept)} of its {len(PYDOC_TOPICS)} topics (the rest repeat them), wrapped lines joined"
    )
    return documents, origin


def unwrap(block: str) -> str:
    """A block with each wrapped paragraph on one line; code, bullets, tables and underlines kept as they are."""
    lines = block.split("\n")
    if any(line.lstrip().startswith(">>>") for line in lines):  # an interactive session: all of it is code
        return block
    out, last = [lines[0]], lines[0]
    for line in lines[1:]:
        text, next_text = last.lstrip(), line.lstrip()
        bullet = BULLET.match(text)
        column = len(last) - len(text) + (bullet.end() if bullet else 0)
        # A filled paragraph's lines run to about 70 columns; code and headings stop short.
        wrapped = len(last.rstrip()) >= 55 and text[:1] not in "+|" and next_text[:1] not in "+|=*-~^>"
        if wrapped and next_text and len(line) - len(next_text) == column and not BULLET.match(next_text):
            out[-1] = f"{out[-1].rstrip()} {next_text}"
        else:
            out.append(line)
        last = line
    return "\n".join(out)


def chinese_documents() -> tuple[list[Document], str]:
    """The Simplified Chinese translations of PostgreSQL's messages, one document per program's catalog."""
    majors = sorted(int(path.stem.rpartition("-")[2]) for path in CATALOGS.glob("postgres-*.mo"))
    if not majors:
        raise FileNotFoundError(f"no PostgreSQL catalog in {CATALOGS}: install PostgreSQL (tools/install_services.sh)")
    paths = [path for path in sorted(CATALOGS.glob(f"*-{majors[-1]}.mo")) if b"postgresql.org" in path.read_bytes()]
    documents = [
        Document(f"{path.stem}.txt", gather(gather(catalog(path), PARAGRAPH_CHARS, "\n"), PAGE_CHARS, "\n\n"))
        for path in paths
    ]
    origin = (
        f"PostgreSQL {majors[-1]}'s zh_CN message catalogs ({CATALOGS}/*-{majors[-1]}.mo, from Debian's postgresql, "
        f"postgresql-client and libpq5 packages): {len(paths)} catalogs, their translated messages in file order"
    )
    return documents, origin


def catalog(path: Path) -> list[str]:
    """The distinct Chinese messages of a gettext .mo file in its order (of a plural, the first form)."""
    data = path.read_bytes()
    order = "<" if data[:4] == b"\xde\x12\x04\x95" else ">"
    count, originals, translations = struct.unpack(f"{order}3I", data[8:20])
    messages = []
    for index in range(count):
        (original_size,) = struct.unpack_from(f"{order}I", data, originals + 8 * index)
        size, offset = struct.unpack_from(f"{order}2I", data, translations + 8 * index)
        text = data[offset : offset + size].decode().split("\0")[0].strip("\n")
        if original_size and CJK.search(text):  # the empty message id carries the catalog's header
            messages.append("\n".join(line.rstrip() for line in text.split("\n")))
    return list(dict.fromkeys(messages))


def gather(parts: list[str], most: int, joint: str) -> list[str]:
    """The parts in order, joined into pieces of about `most` characters (a longer part is a piece alone)."""
    pieces = [""]
    for part in parts:
        if pieces[-1] and len(pieces[-1]) + len(joint) + len(part) > most:
            pieces.append("")
        pieces[-1] = f"{pieces[-1]}{joint}{part}" if pieces[-1] else part
    return pieces


def sentences(language: str, page: str) -> list[str]:
    """The page's sentences fit to be an answer: prose, long enough, on one line."""
    if language == "en":
        found = [part.strip() for line in page.split("\n") for part in ENGLISH_END.split(line.strip())]
        return [s for s in found if 40 <= len(s) <= 240 and PROSE.fullmatch(s) and not s.startswith(NOTES)]
    found = [part.strip() for line in page.split("\n") for part in CHINESE_END.split(line)]
    return [s for s in found if len(CJK.findall(s)) >= 12 and len(s) <= 100]


def pick(documents: list[Document], language: str, count: int, rng: random.Random) -> list[Question]:
    """`count` questions spread over the documents in proportion to their sentences, each with a unique answer."""
    ranked: list[tuple[float, str, str]] = []
    for document in documents:
        found = [s for page in document.pages for s in sentences(language, page)]
        rng.shuffle(found)
        # A document's i-th of n sentences comes at about i/n: documents interleave, each as often as it is big.
        ranked += [((index + rng.random()) / len(found), document.name, s) for index, s in enumerate(found)]
    everything = "\0".join(page for document in documents for page in document.pages)
    common = ngrams(everything) if language == "zh" else Counter()
    asked: list[Question] = []
    for _, name, answer in sorted(ranked):
        if len(asked) == count:
            break
        if everything.count(answer) == 1:
            text = english_question(answer, rng) if language == "en" else chinese_question(answer, rng, common)
            asked += [Question(text, answer, name)] if text else []
    if len(asked) < count:
        raise ValueError(f"only {len(asked)} questions to be had in {language!r}, not {count}")
    return asked


def english_question(sentence: str, rng: random.Random) -> str | None:
    """A question naming 4-7 of the sentence's content words, lightly shuffled; None if it has too few."""
    words = list(dict.fromkeys(w.strip("'’") for w in WORD.findall(sentence) if w.lower() not in STOPWORDS))
    words = [w.lower() if w.istitle() else w for w in words if len(w) > 2]
    if len(words) < 5:
        return None
    # At least one content word forgotten, as by a person half remembering the sentence.
    chosen = [words[i] for i in sorted(rng.sample(range(len(words)), rng.randint(4, min(7, len(words) - 1))))]
    swap = rng.randrange(len(chosen) - 1)
    chosen[swap], chosen[swap + 1] = chosen[swap + 1], chosen[swap]
    return rng.choice(ENGLISH_TEMPLATES.split("|")).format(f"{', '.join(chosen[:-1])} and {chosen[-1]}")


def chinese_question(sentence: str, rng: random.Random, common: Counter[str]) -> str | None:
    """A question naming two or three 2-6 character phrases of the sentence; None if it has fewer than two."""
    phrases: list[str] = []
    for part in (p.lstrip(PREPOSITIONS) for run in CJK_RUN.findall(sentence) for p in PARTICLES.split(run)):
        # Of a long phrase, the longest piece that recurs elsewhere in the corpus, and more often than with the
        # character before or after it here: a word ("文本搜索"), not a word's half ("本搜索配" of "文本搜索配置").
        pieces = []
        for n, i in ((size, start) for size in (4, 3, 2) for start in range(len(part) - size + 1)):
            piece, wider = part[i : i + n], (part[max(i - 1, 0) : i + n], part[i : i + n + 1])
            if common[piece] > 2 and all(common[w] * 3 < common[piece] * 2 for w in wider if len(w) > n):
                pieces.append(piece)
        phrase = part if len(part) <= 6 else rng.choice([p for p in pieces if len(p) == len(pieces[0])] or [""])
        if len(phrase) >= 2 and not any(phrase in other or other in phrase for other in phrases):
            phrases.append(phrase)
    # Rare phrases first, as what a person remembers of a sentence is what sets it apart; no more than 3/5 of the
    # sentence named, so the question does not quote it.
    want, budget, fragments = rng.choice((2, 3)), len(CJK.findall(sentence)) * 3 // 5, list[str]()
    for phrase in sorted(phrases, key=lambda phrase: rng.random() * (1 + common[phrase])):
        if len(fragments) < want and sum(map(len, fragments)) + len(phrase) <= budget:
            fragments.append(phrase)
    if len(fragments) < 2:
        return None
    fragments.sort(key=sentence.index, reverse=rng.random() < 0.3)
    return rng.choice(CHINESE_TEMPLATES.split("|")).format(f"{'、'.join(fragments[:-1])}和{fragments[-1]}")


def ngrams(text: str) -> Counter[str]:
    """How often each run of 2-5 Chinese characters occurs in the text."""
    return Counter(
        run[i : i + n] for run in CJK_RUN.findall(text) for n in range(2, 6) for i in range(len(run) - n + 1)
    )
