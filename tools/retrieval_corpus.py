"""Documents with known answers for measuring passage retrieval (recall@k), built offline from installed text."""

from __future__ import annotations

import platform
import random
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from pydoc_data.topics import topics as PYDOC_TOPICS

PAGE_CHARS = 3000
# A few thousand words per English document: small help topics are merged until a document is this long.
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
STOPWORDS = frozenset(
    "a about above after again all also an and any are as at be because been before being both but by can cannot "
    "could did do does doing done each either else for from further had has have having here how however if in "
    "into is it its itself just may might more most must no nor not now of off on once one only or other otherwise "
    "our out over own same see shall should so some such than that the their them then there these they this those "
    "through thus to too under until up upon used uses using very via was way we were what when where whether which "
    "while who whom why will with within without would yet you your".split()
)
# Function words that end a Chinese phrase, and prepositions that open one ("在", "对" are also inside words).
PARTICLES = "的了和与及或是把被但也都就而"
PREPOSITIONS = "在为从将于当以"
ENGLISH_TEMPLATES = (
    "What does the text say about {}?",
    "Where is {} explained?",
    "What was that part about {}?",
    "Can you find what it says about {}?",
    "I remember something about {}. What exactly?",
)
CHINESE_TEMPLATES = ("文中关于{}是怎么说的？", "哪里提到了{}？", "{}那部分讲的是什么？", "关于{}，文档里写了什么？", "我记得有一段讲{}，具体是怎么说的？")


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
        how = "2-3 fragments of 2-6 characters of the sentence in a Chinese question"
    else:
        raise ValueError(f"no corpus in {language!r}: 'en' or 'zh'")
    asked = pick(documents, language, questions, random.Random(seed))
    source = f"{origin}; questions: {how}, each answered by a sentence found once in the corpus (seed {seed})"
    return Corpus(language, documents, asked, source)


def english_documents() -> tuple[list[Document], str]:
    """Python's own help topics (pydoc_data, the reference manual as plain text), merged into documents."""
    seen: set[str] = set()
    kept: list[tuple[str, list[str]]] = []
    # Largest first: some topics are sections of bigger ones, and the whole section is the one to keep.
    for key in sorted(PYDOC_TOPICS, key=lambda k: (-len(PYDOC_TOPICS[k]), k)):
        blocks = [unwrap(block) for block in BLANK_LINES.split(PYDOC_TOPICS[key].strip()) if block.strip()]
        long = [block for block in blocks if len(block) > 60]  # "Note:" and the like repeat without copying a topic
        if sum(block in seen for block in long) * 2 <= len(long):
            seen.update(long)
            kept.append((key, blocks))
    # A big topic is a document of its own; the small ones, in name order, are gathered into documents.
    groups: list[list[tuple[str, list[str]]]] = [[]]
    for topic in sorted(kept, key=lambda topic: (chars([topic]) >= DOCUMENT_CHARS, topic[0])):
        if chars(groups[-1]) >= DOCUMENT_CHARS or chars([topic]) >= DOCUMENT_CHARS:
            groups.append([])
        groups[-1].append(topic)
    documents = [
        Document(
            f"python-{group[0][0]}.txt" if len(group) == 1 else f"python-{group[0][0]}-to-{group[-1][0]}.txt",
            paginate([block for _, blocks in group for block in blocks]),
        )
        for group in groups
    ]
    origin = (
        f"Python {platform.python_version()}'s pydoc_data.topics (the reference manual behind help(), shipped with "
        f"CPython): {len(kept)} of its {len(PYDOC_TOPICS)} topics (the rest repeat them), wrapped lines joined"
    )
    return documents, origin


def chars(topics: list[tuple[str, list[str]]]) -> int:
    """How many characters the topics' blocks hold."""
    return sum(len(block) for _, blocks in topics for block in blocks)


def unwrap(block: str) -> str:
    """A block with each wrapped prose paragraph on one line; short lines, bullets, tables and underlines kept."""
    lines = block.split("\n")
    out, last = [lines[0]], lines[0]
    for line in lines[1:]:
        text = last.lstrip()
        bullet = BULLET.match(text)
        column = len(last) - len(text) + (bullet.end() if bullet else 0)
        # A filled paragraph's lines run to about 70 columns; code and headings stop short.
        wrapped = len(last.rstrip()) >= 55 and text[:1] not in "+|" and line.lstrip()[:1] not in "+|=*-~^>"
        if wrapped and line.strip() and len(line) - len(line.lstrip()) == column and not BULLET.match(line.lstrip()):
            out[-1] = f"{out[-1].rstrip()} {line.strip()}"
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
    documents = []
    for path in paths:
        paragraphs = [""]
        for message in dict.fromkeys(message for message in catalog(path) if CJK.search(message)):
            if paragraphs[-1] and len(paragraphs[-1]) + len(message) > PARAGRAPH_CHARS:
                paragraphs.append("")
            paragraphs[-1] = f"{paragraphs[-1]}\n{message}" if paragraphs[-1] else message
        documents.append(Document(f"{path.stem}.txt", paginate(paragraphs)))
    origin = (
        f"PostgreSQL {majors[-1]}'s zh_CN message catalogs ({CATALOGS}/*-{majors[-1]}.mo, from Debian's postgresql, "
        f"postgresql-client and libpq5 packages): {len(paths)} catalogs, their translated messages in file order"
    )
    return documents, origin


def catalog(path: Path) -> list[str]:
    """The translated messages of a gettext .mo file in its order (the first plural form; no header)."""
    data = path.read_bytes()
    order = "<" if data[:4] == b"\xde\x12\x04\x95" else ">"
    count, originals, translations = struct.unpack(f"{order}3I", data[8:20])
    messages = []
    for index in range(count):
        (original_size,) = struct.unpack(f"{order}I", data[originals + 8 * index : originals + 8 * index + 4])
        size, offset = struct.unpack(f"{order}2I", data[translations + 8 * index : translations + 8 * index + 8])
        if original_size:  # the empty message id carries the catalog's header
            messages.append("\n".join(line.rstrip() for line in data[offset : offset + size].decode().split("\0")[0].strip("\n").split("\n")))
    return messages


def paginate(paragraphs: list[str]) -> list[str]:
    """Paragraphs gathered into pages of about PAGE_CHARS characters, cut only between paragraphs."""
    pages = [""]
    for paragraph in paragraphs:
        if pages[-1] and len(pages[-1]) + len(paragraph) + 2 > PAGE_CHARS:
            pages.append("")
        pages[-1] = f"{pages[-1]}\n\n{paragraph}" if pages[-1] else paragraph
    return pages


def sentences(language: str, page: str) -> list[str]:
    """The page's sentences distinctive enough to be an answer (prose, long enough, on one line)."""
    if language == "en":
        found = [part.strip() for line in page.split("\n") for part in ENGLISH_END.split(line.strip())]
        return [s for s in found if 40 <= len(s) <= 240 and PROSE.fullmatch(s) and ">>>" not in s]
    found = [part.strip() for line in page.split("\n") for part in CHINESE_END.split(line)]
    return [s for s in found if len(CJK.findall(s)) >= 12 and len(s) <= 100]


def pick(documents: list[Document], language: str, count: int, rng: random.Random) -> list[Question]:
    """`count` questions spread over the documents in proportion to their sentences, each with a unique answer."""
    ranked: list[tuple[float, str, str]] = []
    for document in documents:
        found = [s for page in document.pages for s in sentences(language, page)]
        rng.shuffle(found)
        # A document's i-th of n sentences comes at about i/n: documents interleave, each in proportion to its size.
        ranked += [((index + rng.random()) / len(found), document.name, s) for index, s in enumerate(found)]
    asked: list[Question] = []
    for _, name, answer in sorted(ranked):
        if len(asked) == count:
            break
        if sum(page.count(answer) for document in documents for page in document.pages) != 1:
            continue
        text = english_question(answer, rng) if language == "en" else chinese_question(answer, rng)
        if text is not None:
            asked.append(Question(text, answer, name))
    if len(asked) < count:
        raise ValueError(f"only {len(asked)} questions to be had in {language!r}, not {count}")
    return asked


def english_question(sentence: str, rng: random.Random) -> str | None:
    """A question naming 4-7 of the sentence's content words, lightly shuffled; None if it has too few."""
    words = list(dict.fromkeys(w.strip("'’") for w in WORD.findall(sentence) if w.lower() not in STOPWORDS))
    words = [w.lower() if w.istitle() else w for w in words if len(w) > 2]
    if len(words) < 5:
        return None
    # At least one content word forgotten, as a person half remembering the sentence would.
    chosen = [words[i] for i in sorted(rng.sample(range(len(words)), rng.randint(4, min(7, len(words) - 1))))]
    swap = rng.randrange(len(chosen) - 1)
    chosen[swap], chosen[swap + 1] = chosen[swap + 1], chosen[swap]
    return rng.choice(ENGLISH_TEMPLATES).format(f"{', '.join(chosen[:-1])} and {chosen[-1]}")


def chinese_question(sentence: str, rng: random.Random) -> str | None:
    """A question naming two or three 2-6 character phrases of the sentence; None if it has fewer than two."""
    # Without a segmenter, function words and non-Chinese text are where phrases visibly end.
    phrases = [p.lstrip(PREPOSITIONS) for run in CJK_RUN.findall(sentence) for p in re.split(f"[{PARTICLES}]", run)]
    phrases = list(dict.fromkeys(p if len(p) <= 6 else p[:4] if rng.random() < 0.5 else p[-4:] for p in phrases))
    phrases = [p for p in phrases if len(p) >= 2]
    if len(phrases) < 2:
        return None
    chosen = sorted(rng.sample(range(len(phrases)), min(len(phrases), rng.choice((2, 3)))))
    fragments = [phrases[i] for i in chosen]
    # No more than 3/5 of the sentence named: the question must not quote it.
    while len(fragments) > 2 and sum(map(len, fragments)) > len(CJK.findall(sentence)) * 3 // 5:
        fragments.pop(rng.randrange(len(fragments)))
    if sum(map(len, fragments)) > len(CJK.findall(sentence)) * 3 // 5:
        return None
    if rng.random() < 0.3:
        fragments.reverse()
    return rng.choice(CHINESE_TEMPLATES).format(f"{'、'.join(fragments[:-1])}和{fragments[-1]}")


def main() -> None:
    """Print each corpus's size and a few of its questions."""
    for language in ("en", "zh"):
        built = corpus(language)
        chars = sum(len(page) for document in built.documents for page in document.pages)
        cjk = sum(len(CJK.findall(page)) for document in built.documents for page in document.pages)
        print(f"{language}: {len(built.documents)} documents, {chars} characters ({cjk} CJK), {len(built.questions)} questions")
        print(f"  source: {built.source}")
        for document in built.documents:
            print(f"  {document.name}: {len(document.pages)} pages, {sum(map(len, document.pages))} characters")
        for question in built.questions[:: len(built.questions) // 3][:3]:
            print(f"  Q: {question.text}\n  A: {question.answer}  [{question.document}]")


if __name__ == "__main__":
    main()
