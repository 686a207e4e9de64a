"""`policyc lsp` driven over stdio by pytest-lsp, a real LSP client: what an
editor sees when it opens, edits, hovers, completes, jumps, formats and runs
tests. Run with tests/lsp/run.sh (POLICYC=path/to/policyc to skip the build).
"""

import asyncio
import os
import pathlib

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

POLICYC = os.environ.get("POLICYC", "target/release/policyc")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[POLICYC, "lsp"]))
async def client(lsp_client: LanguageClient, tmp_path: pathlib.Path):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=tmp_path.as_uri(),
        )
    )
    yield
    await lsp_client.shutdown_session()


AGENT = """\
policy agent {
  network {
    allow domain github.com
  }
  permissions { deny shell.exce }
}

test "agent reaches github" {
  policy agent
  expect allow connect github.com:443 because allowed_by_rule
  expect deny connect example.com:443 because not_allowed
}
"""


def open_doc(client: LanguageClient, path: pathlib.Path, text: str, version: int = 1):
    path.write_text(text)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=path.as_uri(), language_id="gatehouse", version=version, text=text
            )
        )
    )
    return path.as_uri()


async def diagnostics_of(client: LanguageClient, uri: str):
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return list(client.diagnostics[uri])


async def eventually(check, seconds: float = 5.0):
    """Waits until `check()` holds: notifications for several documents
    come in an order the test does not fix."""
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    assert check()


def at(text: str, needle: str, offset: int = 0) -> types.Position:
    i = text.index(needle) + offset
    line = text.count("\n", 0, i)
    return types.Position(line=line, character=i - (text.rfind("\n", 0, i) + 1))


async def test_an_error_appears_and_clears_when_fixed(client: LanguageClient, tmp_path):
    uri = open_doc(client, tmp_path / "agent.policy", AGENT)
    diags = await diagnostics_of(client, uri)
    assert [d.code for d in diags] == ["unknown_permission"]
    d = diags[0]
    assert d.severity == types.DiagnosticSeverity.Error
    assert d.range.start == at(AGENT, "shell.exce")
    assert d.range.end == at(AGENT, "shell.exce", len("shell.exce"))
    assert "did you mean `shell.exec`?" in d.message

    fixed = AGENT.replace("shell.exce", "shell.exec")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)],
        )
    )
    assert await diagnostics_of(client, uri) == []


async def test_every_mistake_in_one_pass_with_related_locations(client: LanguageClient, tmp_path):
    (tmp_path / "requirements.policy").write_text(
        "requirements acme {\n  network {\n    default deny\n    allow domain **.acme.example\n  }\n}\n"
    )
    text = "policy team {\n  netwrok {\n    allow domian x.example\n  }\n  network {\n    allow domain github.com\n  }\n}\n"
    uri = open_doc(client, tmp_path / "team.policy", text)
    diags = await diagnostics_of(client, uri)
    codes = [d.code for d in diags]
    assert codes == ["unknown_statement", "syntax_error", "requirement_violation"], codes
    violation = diags[2]
    assert violation.related_information, violation
    related = violation.related_information[0]
    assert related.location.uri == (tmp_path / "requirements.policy").as_uri()
    assert related.location.range.start.line == 1


async def test_hover_documents_keywords_permissions_and_reason_codes(client: LanguageClient, tmp_path):
    uri = open_doc(client, tmp_path / "agent.policy", AGENT)
    await diagnostics_of(client, uri)

    async def hover(needle, offset=1):
        h = await client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=at(AGENT, needle, offset),
            )
        )
        assert h is not None, needle
        return h.contents.value

    async def hover_text(text, needle):
        other = open_doc(client, tmp_path / "other.policy", text)
        h = await client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=other),
                position=at(text, needle, 1),
            )
        )
        return h.contents.value

    assert "`network`" in await hover("network")
    assert "domain PATTERN" in await hover("allow domain")
    assert "**permission** `shell.exec`" in await hover_text(AGENT.replace("shell.exce", "shell.exec"), "shell.exec")
    assert "decision: deny" in await hover("not_allowed")
    assert "decision: allow" in await hover("allowed_by_rule")


async def test_completion_offers_what_fits_the_place(client: LanguageClient, tmp_path):
    text = "policy agent {\n  permissions {\n    deny \n  }\n  network {\n    \n  }\n}\ntest \"t\" {\n  policy \n  expect deny connect x:1 because \n}\n"
    uri = open_doc(client, tmp_path / "agent.policy", text)
    await diagnostics_of(client, uri)

    async def labels(line, character):
        r = await client.text_document_completion_async(
            types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=character),
            )
        )
        items = r.items if isinstance(r, types.CompletionList) else r
        return {i.label for i in items}

    assert {"shell.exec", "files.write"} <= await labels(2, 9)
    assert {"allow", "deny", "default", "dns", "local"} <= await labels(5, 4)
    assert "agent" in await labels(9, 9)
    assert "not_allowed" in await labels(10, 34)


async def test_go_to_definition_from_a_test_to_the_policy_in_another_file(client: LanguageClient, tmp_path):
    (tmp_path / "policy.policy").write_text("policy agent {\n  network off\n}\n")
    text = 'test "offline" {\n  policy agent\n  expect deny connect x.example:443\n}\n'
    uri = open_doc(client, tmp_path / "tests.policy", text)
    await diagnostics_of(client, uri)
    r = await client.text_document_definition_async(
        types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=at(text, "agent", 2),
        )
    )
    loc = r[0] if isinstance(r, list) else r
    assert loc.uri == (tmp_path / "policy.policy").as_uri()
    assert loc.range.start == types.Position(line=0, character=7)


async def test_formatting_returns_the_canonical_text(client: LanguageClient, tmp_path):
    messy = "policy  p {network{allow domain a.example\n  deny domain b.example}}\n"
    uri = open_doc(client, tmp_path / "p.policy", messy)
    await diagnostics_of(client, uri)
    edits = await client.text_document_formatting_async(
        types.DocumentFormattingParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            options=types.FormattingOptions(tab_size=2, insert_spaces=True),
        )
    )
    assert len(edits) == 1
    assert edits[0].new_text == (
        "policy p {\n  network {\n    allow domain a.example\n    deny domain b.example\n  }\n}\n"
    )


async def test_document_symbols(client: LanguageClient, tmp_path):
    uri = open_doc(client, tmp_path / "agent.policy", AGENT)
    await diagnostics_of(client, uri)
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [s.name for s in symbols] == ["agent", "agent reaches github"]
    assert [c.name for c in symbols[0].children] == ["network", "permissions"]


async def test_a_code_lens_runs_one_test_block(client: LanguageClient, tmp_path):
    text = AGENT.replace("shell.exce", "shell.exec") + (
        '\ntest "a wrong expectation" {\n  policy agent\n  expect allow connect example.com:443\n}\n'
    )
    uri = open_doc(client, tmp_path / "agent.policy", text)
    assert await diagnostics_of(client, uri) == []
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [l.command.arguments[1] for l in lenses] == ["agent reaches github", "a wrong expectation"]

    async def run(lens):
        return await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments)
        )

    ok = await run(lenses[0])
    assert (ok["passed"], ok["failed"]) == (2, 0)
    bad = await run(lenses[1])
    assert (bad["passed"], bad["failed"]) == (0, 1)
    assert bad["failures"][0]["actual"] == "deny because not_allowed"
    assert bad["failures"][0]["line"] == 16
    # The server shows the summary before it answers the command.
    assert any("1 failed" in m.message for m in client.messages), client.messages


async def test_editing_requirements_updates_the_policies_open_beside_them(client: LanguageClient, tmp_path):
    team_text = "policy team {\n  network {\n    allow domain github.com\n  }\n}\n"
    team = open_doc(client, tmp_path / "team.policy", team_text)
    assert await diagnostics_of(client, team) == []
    strict = "requirements acme {\n  network {\n    allow domain **.acme.example\n  }\n}\n"
    req = open_doc(client, tmp_path / "requirements.policy", strict)
    codes = lambda: [d.code for d in client.diagnostics.get(team, [])]
    await eventually(lambda: codes() == ["requirement_violation"])
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=req, version=2),
            content_changes=[
                types.TextDocumentContentChangeWholeDocument(
                    text=strict.replace("**.acme.example", "github.com")
                )
            ],
        )
    )
    await eventually(lambda: codes() == [])
