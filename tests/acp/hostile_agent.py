"""An ACP agent (the official ACP Python SDK's agent side) that tries to leave its folder:
it asks its client to write a file outside the folder it was started in, through a symlink
it made there that points outside, into `.git`, and one file inside; then to run a command
in a terminal whose `cwd` is outside, through that symlink, or `..`, and one inside, whose
output it reports; then a long command it waits for while it kills it with a second request
(as an agent's timeout does); last, a command (with one of its own in the background) that it leaves
running when its turn ends. It never asks permission first. `berth run` drives it
(tests/acp/test_run.py); every way out must be refused and recorded.

With HOSTILE_MODE=stall it instead says one thing and waits until it is cancelled; it cannot
load a session (it does not offer `session/load`), so a run of it cannot be resumed.

With HOSTILE_MODE=script it runs HOSTILE_COMMAND (`sh -c`) in a terminal whose `cwd` is its
own folder, a way in that berth allows, and says what it printed: the sandbox's tests
(tests/acp/test_sandbox.py) run tests/sandbox/hostile.sh so."""

import asyncio
import os

from acp import InitializeResponse, NewSessionResponse, PromptResponse, run_agent
from acp.helpers import update_agent_message_text


class Hostile:
    def on_connect(self, conn):
        self.conn = conn

    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
        return InitializeResponse(protocol_version=1)

    async def new_session(self, cwd, **kwargs):
        self.cwd = cwd
        return NewSessionResponse(session_id="hostile-1")

    async def prompt(self, session_id, prompt, **kwargs):
        if os.environ.get("HOSTILE_MODE") == "stall":
            self.cancelled = asyncio.Event()
            await self.conn.session_update(session_id, update_agent_message_text("stalling"))
            await self.cancelled.wait()
            return PromptResponse(stop_reason="cancelled")
        if os.environ.get("HOSTILE_MODE") == "script":
            made = await self.conn.create_terminal(
                session_id=session_id, command="sh", args=["-c", os.environ["HOSTILE_COMMAND"]], cwd=self.cwd
            )
            await self.conn.wait_for_terminal_exit(session_id=session_id, terminal_id=made.terminal_id)
            out = await self.conn.terminal_output(session_id=session_id, terminal_id=made.terminal_id)
            await self.conn.release_terminal(session_id=session_id, terminal_id=made.terminal_id)
            await self.conn.session_update(session_id, update_agent_message_text(out.output))
            return PromptResponse(stop_reason="end_turn")
        outside = os.environ["HOSTILE_OUTSIDE"]
        os.symlink(outside, os.path.join(self.cwd, "link"))
        attempts = {
            "outside": os.path.join(outside, "escaped.txt"),
            "dotdot": os.path.join(self.cwd, "..", "escaped-too.txt"),
            "symlink": os.path.join(self.cwd, "link", "through-link.txt"),
            "git": os.path.join(self.cwd, ".git", "config"),
            "inside": os.path.join(self.cwd, "inside.txt"),
        }
        results = []
        for name, path in attempts.items():
            try:
                await self.conn.write_text_file(session_id=session_id, path=path, content=f"{name}\n")
                results.append(f"{name}:written")
            except Exception:
                results.append(f"{name}:refused")
        terminals = {
            "term-outside": outside,
            "term-symlink": os.path.join(self.cwd, "link"),
            "term-dotdot": os.path.join(self.cwd, ".."),
            "term-inside": self.cwd,
        }
        for name, cwd in terminals.items():
            try:
                made = await self.conn.create_terminal(
                    session_id=session_id,
                    command="sh",
                    args=["-c", f"touch ran-{name}; echo port=$BERTH_PORT; exit 4"],
                    cwd=cwd,
                )
            except Exception:
                results.append(f"{name}:refused")
                continue
            exit = await self.conn.wait_for_terminal_exit(session_id=session_id, terminal_id=made.terminal_id)
            out = await self.conn.terminal_output(session_id=session_id, terminal_id=made.terminal_id)
            await self.conn.release_terminal(session_id=session_id, terminal_id=made.terminal_id)
            results.append(f"{name}:exit={exit.exit_code}:{out.output.strip()}")
        # Waited for, and killed meanwhile: the kill must be answered while the wait is
        # pending, and end the wait.
        try:
            made = await self.conn.create_terminal(
                session_id=session_id, command="sleep", args=["300"], cwd=self.cwd
            )
            waiting = asyncio.ensure_future(
                self.conn.wait_for_terminal_exit(session_id=session_id, terminal_id=made.terminal_id)
            )
            await asyncio.sleep(0.2)
            await asyncio.wait_for(
                self.conn.kill_terminal(session_id=session_id, terminal_id=made.terminal_id), 10
            )
            exit = await asyncio.wait_for(waiting, 10)
            await self.conn.release_terminal(session_id=session_id, terminal_id=made.terminal_id)
            results.append(f"term-killed:{exit.signal}")
        except asyncio.TimeoutError:
            results.append("term-killed:timeout")
        except Exception:
            results.append("term-killed:refused")
        # Left running: the command writes its background process's pid, and neither is
        # killed nor released by the agent. berth must kill both when the turn ends.
        try:
            made = await self.conn.create_terminal(
                session_id=session_id,
                command="sh",
                args=["-c", "sleep 300.0417 & echo $! > left.pid; echo started; wait"],
                cwd=self.cwd,
            )
            while "started" not in (
                await self.conn.terminal_output(session_id=session_id, terminal_id=made.terminal_id)
            ).output:
                await asyncio.sleep(0.02)
            results.append("term-left:started")
        except Exception:
            results.append("term-left:refused")
        await self.conn.session_update(session_id, update_agent_message_text(" ".join(results)))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id, **kwargs):
        if getattr(self, "cancelled", None) is not None:
            self.cancelled.set()


if __name__ == "__main__":
    asyncio.run(run_agent(Hostile()))
