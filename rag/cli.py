"""The `rag` command: a thin layer over the library that turns errors into one-line
messages, draws progress and renders results."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from functools import wraps
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn,
                           TaskProgressColumn, TextColumn, TimeRemainingColumn)
from rich.markup import escape
from rich.table import Table
from rich.padding import Padding
from rich.text import Text

from .errors import NotFoundError, RagError, UsageError
from .query import check_length
from .safety import strip_control



def safe(text: str) -> str:
    """Text from the corpus or the model without what a terminal would obey (control
    characters, ANSI/OSC escapes): stripped at ingest, and again at every output for
    indexes built before that. JSON output escapes them instead."""
    return strip_control(text)[0]


def echo(text: str = "") -> None:
    click.echo(safe(text))


class SafeConsole(Console):
    def print(self, *objects, **kwargs) -> None:
        super().print(*(safe(o) if isinstance(o, str) else o for o in objects), **kwargs)


err = SafeConsole(stderr=True)
# Piped output is plain text or Markdown: no hard wrap, no padding (Rich would wrap
# at 80 columns when stdout is not a terminal).
out = SafeConsole(soft_wrap=not sys.stdout.isatty())

EXAMPLES = """\b
Examples:
  rag ask "Is there work on 1-bit quantization of LLMs?"
  rag ingest ~/Zotero/export.bib papers/          # BibTeX, RIS, CSL-JSON, JSONL, CSV
  rag review "bandit algorithms" -o review.md --bib review.bib
  rag search -k 10 "optimal transport"
  echo "What is BiLLM?" | rag ask -

\b
Exit codes: 0 done, 1 declined or not found, 2 usage, 3 input file, 4 index/store,
5 model, 6 prompt, 7 server, 8 index busy (another writer), 130 interrupted."""


def _env_help() -> str:
    from .config import Settings

    lines = ["\b", "Settings (each also an environment variable):"]
    for name, f in Settings.model_fields.items():
        lines.append(f"  RAG_{name.upper():<22}{f.description}")
    return "\n".join(lines)


def common(fn):
    """Options every command takes, and the edge where errors become one line."""

    @click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
                  envvar="RAG_DATA_DIR", show_envvar=True,
                  help="Index folder (default: a per-user data folder).")
    @click.option("--chroma-url", envvar="RAG_CHROMA_URL", show_envvar=True,
                  help="Use the Chroma server at this URL instead of the embedded store.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
    @wraps(fn)
    def wrapper(*args, data_dir, chroma_url, as_json, **kwargs):
        try:
            overrides = {"data_dir": data_dir, "chroma_url": chroma_url}
            overrides |= {k: kwargs.pop(k) for k in ("model", "llm_url", "llm_model") if k in kwargs}
            return fn(*args, settings=_settings(overrides), as_json=as_json, **kwargs)
        except RagError as e:
            err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            err.print("interrupted")
            sys.exit(130)

    return wrapper


def model_options(fn):
    """Options of the commands that generate text (read by ``common``)."""
    for option in (
        click.option("--llm-model", envvar="RAG_LLM_MODEL", show_envvar=True,
                     help="The model name to ask the server for."),
        click.option("--llm-url", envvar="RAG_LLM_URL", show_envvar=True,
                     help="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1."),
        click.option("-m", "--model", envvar="RAG_MODEL", show_envvar=True,
                     help="A GGUF chat model file (default: SmolLM2-135M)."),
    ):
        fn = option(fn)
    return fn


def _settings(overrides: dict):
    from pydantic import ValidationError

    from .config import Settings

    try:
        # Options given on the command line win over RAG_* variables.
        return Settings(**{k: v for k, v in overrides.items() if v})
    except ValidationError as e:
        first = e.errors()[0]
        raise UsageError(f"setting RAG_{str(first['loc'][0]).upper()}: {first['msg']}") from None


class RateColumn(ProgressColumn):
    """Items per second, once there is a rate to show."""

    def render(self, task) -> Text:
        return Text(f"{task.speed:,.0f}/s" if task.speed else "", style="dim")


@contextmanager
def progress_bar(label: str, enabled: bool):
    """Callbacks (start(total), advance(n)) that draw a bar on a terminal only. The
    bar appears at start(): a step that turns out to have nothing to do shows
    nothing (no "first run" line when the index already exists)."""
    if not enabled or not err.is_terminal:
        yield {}
        return
    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                   RateColumn(), TimeRemainingColumn(), console=err, transient=True)
    task = bar.add_task(label, total=None)

    def start(total: int) -> None:
        bar.update(task, total=total)
        bar.start()

    try:
        yield {"start": start, "advance": lambda n: bar.advance(task, n)}
    finally:
        bar.stop()


def _open_index(settings, searching: bool = False):
    """The index, not yet opened; ``searching`` starts loading the embedder so that
    it loads while the store opens."""
    from .index import Index

    index = Index(settings)
    if searching:
        index.embedder.warm()
    return index


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog=EXAMPLES + "\n\n" + _env_help())
@click.version_option(package_name="rag-abstracts")
def main():
    """A local research assistant over paper abstracts, with citations.

    Abstracts are indexed on this machine (the bundled ICML 2024 seeds on first
    use), and answers, chats and reviews cite the entries they come from."""


def print_hits(title: str, hits) -> None:
    if not out.is_terminal:
        echo(title)
        for h in hits:
            echo(f"{h.rank}. {h.entry.citation()}  {h.score:.2f}")
            echo(f"   {h.snippet}")
        echo()
        return
    out.print(f"[bold]{escape(title)}[/]")
    if not hits:
        out.print("  (nothing found)")
    for h in hits:
        out.print(f"[bold cyan]{h.rank:>2}.[/] {escape(h.entry.citation())}"
                  f"  [green]{h.score:.2f}[/]", highlight=False)
        out.print(Padding(Text(safe(h.snippet), style="dim"), (0, 0, 0, 5)))
    out.print()


def rendered(text: str):
    """Markdown for the terminal (rich.markdown is imported here: 0.05 s that a
    search, which shows none, does not pay)."""
    from rich.markdown import Markdown

    return Markdown(safe(text))


def show_markdown(text: str) -> None:
    """Rendered on a terminal; the Markdown itself when piped (`> file.md`)."""
    if out.is_terminal:
        out.print(rendered(text))
    else:
        echo(text)


def print_withheld(withheld, cited: dict, debug: bool) -> None:
    """Sentences of the entries read that address a reader or a model: never used;
    counted on stderr, and named with --debug."""
    if not withheld:
        return
    if not debug:
        err.print(f"[dim]{len(withheld)} sentence(s) addressing a reader or a model were "
                  "withheld; --debug names them[/]", highlight=False)
        return
    numbers = {e.id: n for n, e in cited.items()}
    err.print(f"withheld {len(withheld)} sentence(s) that address a reader or a model:",
              highlight=False)
    for entry, sentence in withheld:
        n = f"[{numbers[entry.id]}] " if entry.id in numbers else ""
        err.print(f"  {escape(n)}{escape(entry.label[:50])} ({escape(entry.source.path)} "
                  f"#{entry.source.ordinal}): \"{escape(sentence[:120])}\"", highlight=False,
                  soft_wrap=True)


def _notice(message: str) -> None:
    err.print(f"[yellow]{escape(message)}[/]", highlight=False, soft_wrap=True)


def _remember(settings, ids: dict[int, str]) -> None:
    """The numbers of the last answer or search, for `rag show N`."""
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        (settings.data_dir / "last.json").write_text(json.dumps(ids), encoding="utf-8")
    except OSError:
        pass  # a convenience only


def _recalled(settings, n: int) -> str:
    try:
        ids = json.loads((settings.data_dir / "last.json").read_text(encoding="utf-8"))
        return ids[str(n)]
    except (OSError, ValueError, KeyError):
        raise NotFoundError(f"no entry [{n}] in the last answer or search; give an id, key "
                            "or PATH#N") from None


@main.command(short_help="Index abstracts from files or folders.")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--rebuild", is_flag=True,
              help="Drop the index and embed again what it recorded (or PATHS).")
@click.option("--wait", is_flag=True,
              help="If another process is writing to the index, wait for it (else exit 8).")
@common
def ingest(paths, rebuild, wait, settings, as_json):
    """Index abstracts from files or folders.

    Reads BibTeX (.bib), RIS (.ris), CSL-JSON (.json), JSON lines (.jsonl: records
    with title and abstract, the arXiv metadata snapshot, OpenAlex works), CSV and
    the seed text format. Incremental: unchanged entries are skipped, edited ones
    replaced, entries no longer in a re-read file removed. A paper already indexed
    from another file (same DOI, else title and year) is reported, not stored twice.
    With no PATHS, re-reads the files the index recorded (the bundled seeds at first).

    \b
    Examples:
      rag ingest library.bib arxiv-slice.jsonl
      rag ingest ~/papers/            # every readable file below; others listed
      rag ingest --rebuild            # embed everything recorded again"""
    index = _open_index(settings)
    with progress_bar("embedding entries", not as_json) as cb:
        report = index.ingest(list(paths), rebuild=rebuild, wait=wait, notice=_notice, **cb)
    for e in report.errors:
        err.print(f"[bold red]error:[/] {escape(e)}", highlight=False, soft_wrap=True)
    for w in report.warnings + report.duplicates:
        err.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
    if as_json:
        data = report.to_json()
        for k in ("errors", "warnings", "duplicates"):
            if not data[k]:
                data.pop(k)
        click.echo(json.dumps(data))
    else:
        extra = "".join(f", {len(v)} {name}" for v, name in (
            (report.duplicates, "duplicates not stored"), (report.warnings, "warnings")) if v)
        out.print(f"added {report.added}, updated {report.updated}, unchanged {report.unchanged}, "
                  f"removed {report.removed}{extra} — {report.entries} entries, {report.chunks} "
                  f"chunks in {report.seconds:.1f} s", highlight=False)
    if report.errors:
        sys.exit(3)


@main.command(name="list", short_help="Show what is indexed: sources, counts, embedder.")
@common
def list_sources(settings, as_json):
    """Show what is indexed: entries per source file, the counts and the embedder.

    \b
    Example:
      rag list --json"""
    index = _open_index(settings)
    by_path = index.store.ids_by_path()
    recorded = index.sources.paths()
    rows = [{"source": k, "entries": len(v), "file": str(recorded.get(k, ""))}
            for k, v in sorted(by_path.items())]
    summary = {"entries": index.store.count(), "chunks": index.store.chunk_count(),
               "embedder": index.info.embed_model, "chunker": index.info.chunker,
               "data_dir": str(settings.data_dir), "sources": rows}
    if as_json:
        click.echo(json.dumps(summary))
        return
    t = Table(title=f"{summary['entries']} entries, {summary['chunks']} chunks — "
                    f"{summary['embedder']}", title_justify="left")
    for col in ("source", "entries", "read from"):
        t.add_column(col, justify="right" if col == "entries" else "left", overflow="fold")
    for r in rows:
        t.add_row(r["source"], str(r["entries"]), r["file"])
    if out.is_terminal:
        out.print(t)
    else:
        echo(f"{summary['entries']} entries, {summary['chunks']} chunks, {summary['embedder']}")
        for r in rows:
            echo(f"{r['entries']}\t{r['source']}\t{r['file']}")


@main.command(short_help="Show one entry whole, with its metadata.")
@click.argument("ref")
@common
def show(ref, settings, as_json):
    """Show one entry whole, with its metadata.

    REF is N (entry [N] of the last answer or search), an entry id or its first
    characters, a citation key, or PATH#N as `rag list` names the file.

    \b
    Examples:
      rag show 2
      rag show hu_lora_2022
      rag show seeds.bib#4"""
    index = _open_index(settings)
    entry = index.find(_recalled(settings, int(ref)) if ref.isdigit() else ref)
    if as_json:
        click.echo(json.dumps(entry.to_json() | {"text": entry.text, "kind": entry.kind,
                                                 "pages": entry.pages, "volume": entry.volume,
                                                 "publisher": entry.publisher}))
        return
    print_entry(entry, out)


def print_entry(entry, con: Console) -> None:
    """An entry whole: its metadata fields, then the abstract."""
    rows = [("title", entry.title or entry.label), ("authors", "; ".join(entry.author_list)),
            ("year", entry.year_or_venue_year), ("venue", entry.venue), ("volume", entry.volume),
            ("pages", entry.pages), ("publisher", entry.publisher), ("doi", entry.doi),
            ("url", entry.url), ("key", entry.key),
            ("source", f"{entry.source.path} #{entry.source.ordinal}"), ("id", entry.id)]
    for name, value in rows:
        if value:
            con.print(f"[bold]{name + ':':<10}[/] {escape(value)}", highlight=False)
    con.print()
    con.print(entry.text, highlight=False)


@main.command(short_help="Remove a source file's entries from the index.")
@click.argument("paths", nargs=-1, required=True)
@click.option("--wait", is_flag=True,
              help="If another process is writing to the index, wait for it (else exit 8).")
@common
def remove(paths, wait, settings, as_json):
    """Remove the entries of source files (as `rag list` names them, or their path).

    \b
    Example:
      rag remove old-export.bib"""
    index = _open_index(settings)
    removed = {p: index.remove(p, wait, _notice) for p in paths}
    if as_json:
        click.echo(json.dumps({"removed": removed, "entries": index.store.count()}))
        return
    for p, n in removed.items():
        out.print(f"removed {n} entries from {escape(p)}", highlight=False)


def _queries(query: str | None, queries: Path | None, command: str = "search") -> list[str]:
    qs = _read_queries(query, queries, command)
    for q in qs:
        check_length(q)  # before anything slow is loaded
    return qs


def _read_queries(query: str | None, queries: Path | None, command: str) -> list[str]:
    if query == "-":  # one question per line of stdin
        lines = [q.strip() for q in sys.stdin]
        if not any(lines):
            raise UsageError(f"no questions on stdin; e.g. echo \"What is BiLLM?\" | rag {command} -")
        return [q for q in lines if q]
    if queries:
        try:
            lines = [q.strip() for q in queries.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read {queries}: {e}; give a UTF-8 file, one query per line") from None
        lines = [q for q in lines if q]
        if not lines:
            raise UsageError(f"{queries} has no queries; put one query per line")
        return lines
    if not query or not query.strip():
        raise UsageError(f'give a question, e.g. rag {command} "Which papers study bandits?", '
                         "or --queries FILE")
    return [query]


@main.command(short_help="Find the entries that best match a query.")
@click.argument("query", required=False)
@click.option("-k", "--k", type=click.IntRange(1, 100), default=None,
              help="How many entries (default 5).")
@click.option("-q", "--queries", type=click.Path(dir_okay=False, path_type=Path),
              help="Run one query per line of this file.")
@common
def search(query, k, queries, settings, as_json):
    """Find the entries that best match QUERY (dense + BM25, one row per entry).

    QUERY "-" reads one query per line from stdin. Exits 1 when nothing is found.

    \b
    Examples:
      rag search "optimal transport"
      rag search -k 10 --json "watermarking language models"
    """
    qs = _queries(query, queries)
    index = _open_index(settings, searching=True)
    with progress_bar("first run: indexing the bundled seeds", not as_json) as cb:
        index.ensure_ingested(**cb)
    found = True
    for q in qs:
        hits = index.search(q, k)
        found &= bool(hits)
        _remember(settings, {h.rank: h.entry.id for h in hits})
        if as_json:
            click.echo(json.dumps({"query": q, "results": [h.to_json() for h in hits]}))
            continue
        print_hits(q, hits)
    if not found:
        sys.exit(1)


def _answerer(settings):
    from .answer import Answerer
    from .llm import load_model
    from .prompts import load

    prompts = load()  # checked before anything slow happens
    index = _open_index(settings, searching=True)
    with progress_bar("first run: indexing the bundled seeds", True) as cb:
        index.ensure_ingested(**cb)
    model = load_model(settings.model, settings.llm_url, settings.llm_model,
                       settings.llm_api_key.get_secret_value(), settings.llm_ctx)
    return Answerer(index, model, prompts)


def references(ans) -> str:
    return "\n".join(e.reference(n) for n, e in sorted(ans.cited.items()))


def print_answer_plain(ans, heading: str = "") -> None:
    """An answer as Markdown text for a pipe: no wrapping, no styling."""
    if heading:
        echo(f"## {heading}\n")
    echo(ans.text)
    if ans.cited:
        echo("\n" + references(ans))
    elif ans.refused:
        echo("\nClosest entries:\n" + "\n".join(
            h.entry.reference(h.rank) for h in ans.retrieved[:3]))
    echo()


def print_answer_live(ask, question: str, *args):
    """On a terminal: a spinner naming each step, each sentence printed as it is
    settled, then the references. ``ask`` is Answerer.ask or Conversation.ask."""
    from rich.live import Live
    from rich.spinner import Spinner

    # Something shows at once and names the step under way: searching, reading the
    # entries, answering from [1] BiLLM. The model's draft is not shown: most of what a
    # small model drafts is never verified, and a reader would see it before it goes.
    spinner = Spinner("dots", Text("searching…", style="dim"))
    step, drafted = ["searching"], [0]
    with Live(spinner, console=out, transient=True, refresh_per_second=12,
              auto_refresh=out.is_terminal) as live:
        def show() -> None:
            words = f" ({drafted[0]} tokens drafted)" if drafted[0] else ""
            spinner.update(text=Text(safe(step[0]) + "…" + words, style="dim"))
            live.update(spinner)

        def on_step(label: str) -> None:
            step[0], drafted[0] = label, 0
            show()

        def on_token(tok: str) -> None:
            drafted[0] += 1
            show()

        def on_sentence(sentence) -> None:
            live.console.print(rendered(sentence.render()))

        result = ask(question, *args, on_token=on_token, on_sentence=on_sentence, on_step=on_step)
    ans = getattr(result, "answer", result)
    if ans.table:
        out.print(rendered(ans.table_markdown()))
    if ans.interrupted:
        out.print("[yellow](stopped)[/]")
    if ans.cited:
        out.print(Text(safe("\n" + references(ans)), style="cyan"))
    if ans.refused and not ans.cited:
        print_hits("Closest entries", ans.retrieved[:3])
    return result


@main.command(short_help="Answer a question from the collection, with citations.")
@click.argument("question", required=False)
@click.option("-k", "--k", type=click.IntRange(1, 20), default=None,
              help="Entries to retrieve (default 5).")
@click.option("-q", "--queries", type=click.Path(dir_okay=False, path_type=Path),
              help="Answer one question per line of this file.")
@click.option("--debug", is_flag=True, help="Name the withheld sentences (see README).")
@model_options
@common
def ask(question, k, queries, debug, settings, as_json):
    """Answer QUESTION from the collection; every sentence cites its entries.

    QUESTION "-" reads one question per line from stdin. Exits 1 when the
    collection does not answer (the closest entries are listed).

    \b
    Examples:
      rag ask "Is there work on 1-bit quantization of LLMs?"
      rag ask --json "Which papers study bandits?" | jq .citations"""
    qs = _queries(question, queries, "ask")
    answerer = _answerer(settings)
    declined = False
    for q in qs:
        if as_json:
            ans = answerer.ask(q, k)
            click.echo(json.dumps(ans.to_json()))
        elif out.is_terminal:
            if len(qs) > 1:
                out.rule(q)
            ans = print_answer_live(answerer.ask, q, k)
        else:
            ans = answerer.ask(q, k)
            print_answer_plain(ans, heading=q if len(qs) > 1 else "")
        declined |= ans.refused and not ans.cited
        _remember(settings, {n: e.id for n, e in ans.cited.items()})
        print_withheld(ans.withheld, ans.cited, debug)
    if declined:
        sys.exit(1)


CHAT_HELP = """Ask questions in plain language; follow-ups may say "it", "that paper", "[2]",
"the second paper", "compare [1] and [3]" or "only the RL papers".
/help            this help
/sources         entries cited so far, with their numbers
/show N          the full abstract of entry [N]
/k N             retrieve N entries per question (now: {k})
/model           the chat model in use
/debug           show the rewritten query and withheld sentences (now: {debug})
/clear           forget the conversation (numbers start again at [1])
/save FILE       write the conversation as Markdown with references
/quit            leave (Ctrl-D also works; Ctrl-C stops an answer)"""


def _chat_command(conv, line: str, state: dict, con: Console) -> bool:
    """Run one slash command, printing to ``con``; False when the chat should end."""
    cmd, _, arg = line[1:].strip().partition(" ")
    arg = arg.strip()
    if cmd in ("quit", "exit", "q"):
        return False
    if cmd == "help":
        con.print(CHAT_HELP.format(k=conv.k or conv.answerer.index.settings.k,
                                   debug="on" if state["debug"] else "off"), highlight=False)
    elif cmd == "sources":
        con.print(conv.references() or "no entries cited yet", highlight=False)
    elif cmd == "show":
        if not arg.strip("[]").isdigit():
            raise UsageError("usage: /show N, e.g. /show 2")
        print_entry(conv.entry(int(arg.strip("[]"))), con)
    elif cmd == "k":
        if not arg.isdigit() or not 1 <= int(arg) <= 20:
            raise UsageError("usage: /k N with N from 1 to 20")
        conv.k = int(arg)
        con.print(f"retrieving {conv.k} entries per question")
    elif cmd == "model":
        con.print(conv.answerer.model.path, highlight=False)
    elif cmd == "debug":
        state["debug"] = not state["debug"]
        con.print(f"debug {'on' if state['debug'] else 'off'}")
    elif cmd == "clear":
        conv.clear()
        con.print("conversation cleared")
    elif cmd == "save":
        if not arg:
            raise UsageError("usage: /save FILE.md")
        conv.save(Path(arg).expanduser())
        con.print(f"saved {len(conv.turns)} turns to {arg}")
    else:
        raise UsageError(f"unknown command /{cmd}; type /help for the list")
    return True


@main.command(short_help="A conversation with the collection, with follow-ups.")
@click.option("-k", "--k", type=click.IntRange(1, 20), default=None,
              help="Entries to retrieve per turn.")
@model_options
@common
def chat(k, settings, as_json):
    """A conversation with the collection (REPL with history and follow-ups).

    With stdin not a terminal, reads one turn per line (slash commands too) and
    prints plain text, or with --json one `rag ask --json` object per turn plus
    "turn" and "rewritten_query".

    \b
    Examples:
      rag chat
      printf 'What is BiLLM?\\nHow many bits does it use?\\n' | rag chat --json"""
    from .chat import Conversation

    conv = Conversation(_answerer(settings), k)
    state = {"debug": False}
    interactive = sys.stdin.isatty() and not as_json
    if interactive:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory

        settings.data_dir.mkdir(parents=True, exist_ok=True)
        session = PromptSession(history=FileHistory(str(settings.data_dir / "chat_history")))
        out.print("[dim]Ask about the collection; /help for commands, Ctrl-D to leave.[/]")

        def lines():
            while True:
                try:
                    yield session.prompt("rag> ")
                except KeyboardInterrupt:
                    continue
                except EOFError:
                    return
    else:
        def lines():
            yield from sys.stdin

    for raw in lines():
        line = " ".join(raw.split())  # a multi-line paste is one question
        if not line:
            continue
        try:
            if line.startswith("/"):
                # With --json, stdout carries only the turns' JSON.
                if not _chat_command(conv, line, state, err if as_json else out):
                    break
                continue
            if as_json:
                turn = conv.ask(line)
                click.echo(json.dumps({"turn": turn.n, "rewritten_query": turn.query}
                                      | turn.answer.to_json()))
                continue
            if state["debug"]:
                out.print(f"[dim]query: {escape(conv.resolve(line)[0])}[/]")
            if interactive:
                turn = print_answer_live(conv.ask, line)
            else:
                turn = conv.ask(line)
                out.print(turn.answer.text, highlight=False, soft_wrap=True)
                if turn.answer.cited:
                    out.print(references(turn.answer), highlight=False, soft_wrap=True)
            print_withheld(turn.answer.withheld, turn.answer.cited, state["debug"])
            out.print()
        except RagError as e:
            err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
        except KeyboardInterrupt:
            out.print("[yellow](stopped)[/]")


@main.command(short_help="A cited overview of a topic, grouped by theme.")
@click.argument("topic")
@click.option("-k", "--k", type=click.IntRange(1, 100), default=None,
              help="Entries to consider before the relevance cut (default 30).")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the review as Markdown.")
@click.option("-b", "--bib", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the cited entries as BibTeX.")
@click.option("--cite-style", type=click.Choice(["numeric", "pandoc"]), default="numeric",
              help="[n] markers, or [@key] markers for pandoc --citeproc with --bib.")
@click.option("--table/--no-table", default=True,
              help="Include the research table (problem, approach, result, setting).")
@click.option("--csv", "csv_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the research table as CSV.")
@click.option("--debug", is_flag=True, help="Name the withheld sentences (see README).")
@model_options
@common
def review(topic, k, out_file, bib, cite_style, table, csv_file, debug, settings, as_json):
    """A cited overview of what the collection holds on TOPIC, grouped by theme.

    Piped, it prints the same Markdown that --out writes. A review the collection
    cannot support writes no files and exits 1.

    \b
    Examples:
      rag review "bandit algorithms" -o review.md --bib review.bib
      rag review "LLM quantization" --cite-style pandoc -o r.md -b r.bib --csv table.csv
      pandoc r.md --citeproc --bibliography r.bib -o r.html"""
    from .review import review as make_review

    if not topic.strip():
        raise UsageError('give a topic, e.g. rag review "bandit algorithms"')
    check_length(topic, "topic", 'give a few words, e.g. rag review "bandit algorithms"')
    # Fail before the review is generated, not after.
    for path in (out_file, bib, csv_file):
        if path and (path.is_dir() or not path.parent.is_dir() or not os.access(path.parent, os.W_OK)):
            raise UsageError(f"cannot write {path}: no such writable folder; pick another path")
    answerer = _answerer(settings)
    with progress_bar("reviewing", not as_json) as cb:
        def progress(total, label):
            if total is not None:
                cb.get("start", lambda n: None)(total)
            else:
                cb.get("advance", lambda n: None)(1)

        rv = make_review(answerer, topic.strip(), k, progress)
    markdown = rv.markdown(cite_style, table)
    print_withheld(rv.withheld, {rv.numbers[e.id]: e for e in rv.cited}, debug)
    if not rv.refused:
        for path, text in ((out_file, markdown), (bib, rv.bibtex()), (csv_file, rv.csv())):
            if path:
                try:
                    path.write_text(text, encoding="utf-8")
                except OSError as e:
                    raise UsageError(f"cannot write {path}: {e.strerror}; pick another path") from None
                err.print(f"[dim]wrote {escape(str(path))}[/]")
    if as_json:
        click.echo(json.dumps(rv.to_json(cite_style)))
    else:
        show_markdown(markdown)
    if rv.refused:
        if out_file or bib or csv_file:
            err.print("[yellow]nothing written: the collection does not cover this topic[/]")
        sys.exit(1)


@main.command(name="eval", short_help="Run a question set and print its metrics.")
@click.argument("questions", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--retrieval-only", is_flag=True,
              help="Skip generation (fast); \"declined\" is then the score threshold alone.")
@click.option("--split", type=click.Choice(["dev", "test", "all"]), default="all",
              help="Which part of the question set (test: held out from tuning).")
@click.option("-k", "--k", type=click.IntRange(1, 50), default=None, help="Entries to retrieve.")
@model_options
@common
def evaluate(questions, retrieval_only, split, k, settings, as_json):
    """Run a question set through the pipeline and print its metrics per kind.

    \b
    Example:
      rag eval eval/questions.jsonl --split test"""
    from .evaluate import Scores, answer_metrics, is_dialogues, load_dialogues, load_questions, retrieval_metrics

    if is_dialogues(questions):
        if retrieval_only:
            raise UsageError("conversations are scored on their answers; drop --retrieval-only")
        table = _evaluate_dialogues(load_dialogues(questions, split), k, settings, as_json)
    else:
        qs = load_questions(questions, split)
        if retrieval_only:
            index = _open_index(settings, searching=True)
            index.ensure_ingested()
            answerer = None
        else:
            answerer = _answerer(settings)
            index = answerer.index
        table = Scores()
        with progress_bar("evaluating", not as_json) as cb:
            cb.get("start", lambda n: None)(len(qs))
            for q in qs:
                if answerer:
                    ans = answerer.ask(q.question, k)
                    hits, metrics = ans.retrieved, answer_metrics(q, ans)
                else:
                    from .answer import REFUSE_BELOW

                    hits = index.search(q.question, max(k or 10, 10))
                    metrics = {"declined": float(not hits or hits[0].score < REFUSE_BELOW)}
                if q.gold:
                    metrics |= retrieval_metrics(q, index.search(q.question, 10) if answerer else hits)
                table.add(q, metrics)
                cb.get("advance", lambda n: None)(1)
    summary = table.summary()
    if as_json:
        click.echo(json.dumps({"questions": str(questions), "split": split, "metrics": summary}))
        return
    cols = sorted({c for row in summary.values() for c in row} - {"n"})
    t = Table(title=f"{questions} ({split})", title_justify="left")
    t.add_column("kind")
    t.add_column("n", justify="right")
    for c in cols:
        t.add_column(c.replace("citation_", "cite_"), justify="right")
    for g, row in summary.items():
        t.add_row(g, str(row["n"]), *(f"{row[c]:.3f}" if c in row else "" for c in cols))
    out.print(t)


def _evaluate_dialogues(dialogues, k, settings, as_json):
    """Each conversation through one chat :class:`Conversation`, every turn scored
    against its own gold; turns that miss are listed (on stderr) for reading."""
    from .chat import Conversation
    from .evaluate import Scores, answer_metrics

    answerer = _answerer(settings)
    table = Scores()
    with progress_bar("conversations", not as_json) as cb:
        cb.get("start", lambda n: None)(sum(len(d.turns) for d in dialogues))
        for d in dialogues:
            conv = Conversation(answerer, k=k)
            for q in d.turns:
                try:
                    ans = conv.ask(q.question).answer
                except UsageError as e:  # "[3]" when the conversation cited two papers
                    err.print(escape(f"{q.id}: {e}"), highlight=False)
                    table.add(q, {"declined": 1.0, "citation_recall": 0.0} if q.gold else {"declined": 1.0})
                    cb.get("advance", lambda n: None)(1)
                    continue
                metrics = answer_metrics(q, ans)
                table.add(q, metrics)
                if metrics.get("citation_recall", 1.0) < 1 or metrics.get("citation_precision", 1.0) < 1 \
                        or bool(q.gold) == bool(ans.refused):
                    cited = ", ".join(f"{e.source.path[:3]}#{e.source.ordinal}" for e in ans.cited.values())
                    gold = ", ".join(f"{p[:3]}#{o}" for p, o in sorted(q.gold)) or "none"
                    err.print(escape(f"{q.id} {q.question!r}: cited {cited or 'none'}; wanted {gold}"), highlight=False)
                cb.get("advance", lambda n: None)(1)
    return table


if __name__ == "__main__":
    main()
