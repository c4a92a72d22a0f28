"""Tool arguments are checked by a real JSON Schema implementation (issue 17, item 12):
the keywords the old hand-written subset ignored (pattern, maxLength, oneOf,
exclusiveMinimum, uniqueItems) refuse bad input with VALIDATION_ERROR naming the field;
a script whose schema (or annotations, or outputSchema) is invalid is refused at load,
its last good version staying."""

import pytest

from conftest import mcp_client
from test_scripts import eventually

pytestmark = pytest.mark.anyio

STRICT = """return {
  name = "strict",
  description = "Echoes valid input.",
  inputSchema = {
    type = "object",
    additionalProperties = false,
    properties = {
      label = { type = "string", pattern = "^[a-z_]+$" },
      short = { type = "string", maxLength = 4 },
      at = { oneOf = { { type = "string", pattern = "^0x" }, { type = "integer", minimum = 0 } } },
      ratio = { type = "number", exclusiveMinimum = 0 },
      tags = { type = "array", items = { type = "string" }, uniqueItems = true },
      limit = { type = "integer" },
    },
  },
  handler = function(args) return { ok = true, version = VERSION } end,
}
"""


def strict(version=1, schema_patch=None, extra=""):
    text = STRICT.replace("VERSION", str(version))
    if schema_patch:
        text = text.replace('limit = { type = "integer" },', schema_patch)
    return text.replace('  handler =', extra + '  handler =')


async def test_keywords_the_old_subset_ignored_refuse_bad_input(strobe_home):
    tools = strobe_home / "scripts" / "tools"
    tools.mkdir(parents=True)
    (tools / "strict.lua").write_text(strict())
    async with mcp_client(strobe_home) as c:
        ok = {"label": "a_b", "short": "abcd", "at": "0x10", "ratio": 0.5, "tags": ["x", "y"], "limit": 3}
        assert (await c.call("strict", **ok))["ok"] is True
        assert (await c.call("strict", at=7))["ok"] is True
        bad = [
            ({"label": "A-B"}, "args.label must match the regular expression ^[a-z_]+$"),
            ({"short": "abcde"}, "args.short must have at most 4 characters, got 5"),
            ({"at": "10"}, "args.at matches none of the 2 allowed forms"),
            ({"at": -1}, "args.at matches none of the 2 allowed forms"),
            ({"ratio": 0}, "args.ratio must be > 0, got 0"),
            ({"tags": ["x", "x"]}, "args.tags must not repeat an item"),
            ({"limit": 5.0}, "args.limit must be an integer, got number 5.0"),
        ]
        for args, expected in bad:
            e = await c.error("strict", **args)
            assert e.code == "VALIDATION_ERROR" and expected in e.message, (args, e.message)
        # The shipped tools' own schemas count too: debug_eval caps an expression at 4096 characters.
        e = await c.error("debug_eval", sessionId="s", expressions=["x" * 5000])
        assert e.code == "VALIDATION_ERROR" and "args.expressions[0] must have at most 4096 characters" in e.message, e


async def test_a_script_with_an_invalid_schema_is_refused_at_load(strobe_home):
    tools = strobe_home / "scripts" / "tools"
    tools.mkdir(parents=True)
    (tools / "strict.lua").write_text(strict(version=1))
    async with mcp_client(strobe_home) as c:
        assert (await c.call("strict"))["version"] == 1
        broken = [
            (strict(2, 'limit = { type = "integr" },'), "inputSchema is not a valid JSON Schema"),
            (strict(2, 'limit = { type = "string", minLength = -1 },'), "/properties/limit/minLength"),
            (strict(2, extra='  annotations = { readOnly = true },\n'), "annotations.readOnly is not an MCP hint"),
            (strict(2, extra='  annotations = { readOnlyHint = "yes" },\n'), "annotations.readOnlyHint must be a boolean"),
            (strict(2, extra='  outputSchema = { type = "array" },\n'), "outputSchema must describe an object"),
        ]
        for text, expected in broken:
            (tools / "strict.lua").write_text(text)

            async def reported():
                r = await c.call("strict")
                errs = [e for e in r.get("scriptErrors", []) if expected in e["message"]]
                return (r, errs[0]) if errs else None

            r, err = await eventually(f"the error '{expected}' is reported", reported)
            # The last good version keeps answering, and the error says so.
            assert r["version"] == 1 and err["file"].endswith("tools/strict.lua"), r
            assert "last good version" in err["message"], err
        # A fixed script loads again, with its declared metadata.
        (tools / "strict.lua").write_text(strict(3, extra='  title = "Strict echo",\n  annotations = { readOnlyHint = true },\n'))

        async def fixed():
            r = await c.call("strict")
            return r["version"] == 3 and "scriptErrors" not in r

        await eventually("the fixed script loads", fixed)
        t = next(t for t in (await c.session.list_tools()).tools if t.name == "strict")
        assert t.title == "Strict echo" and t.annotations.read_only_hint is True, t


GREETER = """local greet = require("greet")
return { name = "greeter", description = "Greets.", inputSchema = { type = "object" },
  handler = function() return { version = 1, greeting = greet.hello() } end }
"""


@pytest.mark.parametrize("broken", ["tool", "lib"])
async def test_a_worker_started_after_a_script_broke_serves_its_last_good_version(strobe_home, broken):
    """Found by the test above under load: a Lua worker started after a script (or a lib it
    requires) broke had no last good version of it, so the tool vanished ('Unknown tool')."""
    import anyio

    tools = strobe_home / "scripts" / "tools"
    tools.mkdir(parents=True)
    lib = strobe_home / "scripts" / "lib"
    lib.mkdir(parents=True)
    (lib / "greet.lua").write_text('return { hello = function() return "hi" end }\n')
    (tools / "greeter.lua").write_text(GREETER)
    (tools / "strict.lua").write_text(strict(version=1))
    tool = "strict" if broken == "tool" else "greeter"
    async with mcp_client(strobe_home) as c:
        assert (await c.call(tool))["version"] == 1
        if broken == "tool":
            (tools / "strict.lua").write_text(strict(2, 'limit = { type = "integr" },'))
        else:
            (lib / "greet.lua").write_text("return { hello = function() return 'hi' end\n")

        async def reported():
            return (await c.call(tool)).get("scriptErrors")

        await eventually("the broken script is reported", reported)
        answers = []

        async def busy_script():
            # A running debug_script keeps its worker to itself: the next call starts a new one.
            await c.call("debug_script", script="strobe.sleep(3000) return 1")

        async with anyio.create_task_group() as tg:
            tg.start_soon(busy_script)
            await anyio.sleep(1.0)
            answers.append(await c.call(tool))
        assert answers[0]["version"] == 1 and answers[0]["scriptErrors"], answers
