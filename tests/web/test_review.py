"""A run's review page (`/runs/ID`) in a real headless Chromium: two agents' diffs side by
side, a comment on a line of one diff that reaches that agent (quoting the file and the line)
and lands its change in the same worktree, and Merge, which merges the chosen agent's work
into the base branch and deletes the other's workspace. Screenshots at a phone's and a
desktop's width land in target/web-screenshots/ (review-desktop.png, review-phone.png).
"""

import json
import subprocess

from conftest import (
    BERTH,
    DESKTOP,
    PHONE,
    Reply,
    berth_json,
    env_for,
    screenshot,
    serving,
    sign_in,
    wait_for,
)
from test_web import by_css, git_repo


def write(call_id, content, path="out.txt"):
    # Slow enough that both agents' first requests arrive before either write is answered.
    return Reply().tool(call_id, "write_file", {"path": path, "content": content}).slowly(0.5)


def test_two_agents_side_by_side_a_line_comment_and_merge(home, provider, browser, tmp_path):
    repo = git_repo(tmp_path / "repo")
    # Both first requests arrive before either write is answered (they stream slowly); then
    # each agent's closing text.
    provider.push(write("w1", "alpha\n"))
    provider.push(write("w2", "beta\nbeta two\n"))
    provider.push(Reply().text("Done."))
    provider.push(Reply().text("Done."))
    ran = subprocess.run(
        [BERTH, "run", "Write out.txt", "--agents", "2", "--allow", "write_file", "--check", "test -f out.txt"],
        cwd=repo,
        env=env_for(home, provider),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    [run] = berth_json(home, "run", "list")
    run_id = run["id"]
    compared = berth_json(home, "run", "compare", run_id)
    by_lines = {a["added"]: a for a in compared["agents"]}
    assert sorted(by_lines) == [1, 2], compared
    one_line, two_lines = by_lines[1], by_lines[2]

    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/runs/{run_id}")
        agents = wait_for(browser, lambda d: by_css(d, ".compare section.agent"))
        assert len(agents) == 2
        # Side by side on a desktop: the second column starts to the right of the first.
        first, second = (a.rect for a in agents)
        assert second["x"] > first["x"] + first["width"] / 2 and abs(second["y"] - first["y"]) < 5
        texts = [a.text for a in agents]
        assert any("alpha" in t for t in texts) and any("beta two" in t for t in texts)
        for a in agents:
            assert "passed" in a.find_element("css selector", "dd.check").text
        screenshot(browser, "review-desktop", DESKTOP)
        screenshot(browser, "review-phone", PHONE)
        # Stacked on a phone, each column the page's width.
        browser.set_window_size(*PHONE)
        agents = by_css(browser, ".compare section.agent")
        assert agents[1].rect["y"] > agents[0].rect["y"] + agents[0].rect["height"] - 5
        assert browser.execute_script("return document.documentElement.scrollWidth") <= PHONE[0]
        browser.set_window_size(*DESKTOP)

        # A comment on the one-line agent's line 1 reaches that agent, quoting file and line.
        provider.push(write("w3", "alpha\nfixed after review\n"))
        provider.push(Reply().text("Fixed."))
        column = next(
            a for a in by_css(browser, ".compare section.agent") if a.get_attribute("data-agent") == str(one_line["agent"])
        )
        line = column.find_element("css selector", '.diff .line[data-file="out.txt"][data-line="1"]')
        line.click()
        box = wait_for(browser, lambda d: by_css(d, ".comment-box textarea"))[0]
        box.send_keys("Say why on this line.")
        by_css(browser, ".comment-box button")[0].click()
        wait_for(browser, lambda d: len(provider.requests) >= 6, timeout=30)
        told = json.dumps(provider.requests[4]["messages"])
        assert "out.txt line 1" in told and "> +alpha" in told and "Say why on this line." in told
        # Same session and workspace: the change lands in the same worktree.
        def fixed(_):
            shown = berth_json(home, "workspace", "show", one_line["workspace"])
            path = shown["git"]["worktree"] + "/out.txt"
            with open(path) as f:
                return "fixed after review" in f.read()

        wait_for(browser, fixed, timeout=30)
        session = berth_json(home, "session", "show", one_line["session"])
        asked = [m for m in session["messages"] if m["role"] == "user"]
        assert asked[0]["content"] == "Write out.txt" and "Say why on this line." in asked[1]["content"], asked

        # Merge the two-line agent's work and delete the other's workspace.
        wait_for(browser, lambda d: berth_json(home, "run", "list")[0]["state"] == "ended", timeout=30)
        browser.get(f"{base}/runs/{run_id}")
        column = next(
            a
            for a in wait_for(browser, lambda d: by_css(d, ".compare section.agent"))
            if a.get_attribute("data-agent") == str(two_lines["agent"])
        )
        column.find_element("css selector", "button.merge-only").click()
        browser.switch_to.alert.accept()
        wait_for(
            browser,
            lambda d: subprocess.run(["git", "show", "main:out.txt"], cwd=repo, capture_output=True, text=True).stdout
            == "beta\nbeta two\n",
            timeout=30,
        )
        # Picked: the run records how each ended (once the page's request is over), and the
        # page shows it, with nothing more to merge or tell.
        def outcomes(d):
            return [a.get("outcome") for a in berth_json(home, "run", "show", run_id)["agents"]]

        expected = {two_lines["agent"]: "merged", one_line["agent"]: "discarded"}
        wait_for(browser, lambda d: outcomes(d) == [expected[n] for n in (1, 2)], timeout=30)
        browser.get(f"{base}/runs/{run_id}")
        columns = wait_for(browser, lambda d: by_css(d, ".compare section.agent"))
        shown = {a.get_attribute("data-agent"): a for a in columns}
        winner = shown[str(two_lines["agent"])]
        assert winner.find_element("css selector", "dd.outcome").text == "merged"
        assert not winner.find_elements("css selector", "button.merge, form.tell")
        loser = shown[str(one_line["agent"])]
        assert loser.find_element("css selector", "dd.outcome").text == "discarded"
    # As `berth run pick` does: the winner's workspace removed with the others'.
    names = [w["name"] for w in berth_json(home, "workspace", "list")]
    assert two_lines["workspace_name"] not in names and one_line["workspace_name"] not in names, names


def test_a_question_of_an_asking_run_is_answered_on_the_review_page(home, provider, browser, tmp_path):
    """A run started with --ask waits on its agent's write; the review page shows the question
    with Allow, Always allow and Deny, and Allow lets the agent go on to write and end."""
    repo = git_repo(tmp_path / "repo")
    provider.push(Reply().tool("w1", "write_file", {"path": "out.txt", "content": "from the page\n"}))
    provider.push(Reply().text("Done."))
    started = subprocess.run(
        [BERTH, "run", "Write out.txt", "--ask", "--detach"],
        cwd=repo, env=env_for(home, provider), capture_output=True, text=True, timeout=60,
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()

    def waiting(_d=None):
        agent = berth_json(home, "run", "show", run_id)["agents"][0]
        return agent.get("waiting") and agent

    with serving(home, provider) as base:
        sign_in(browser, base)
        agent = wait_for(browser, waiting, timeout=30)
        assert agent["waiting"]["tool"] == "write_file", agent
        browser.get(f"{base}/runs/{run_id}")
        question = wait_for(browser, lambda d: by_css(d, ".compare section.agent .question"))[0]
        assert "write_file" in question.text and "out.txt" in question.text, question.text
        # A running agent cannot be merged or dropped: no buttons that would fail, but why.
        section = by_css(browser, ".compare section.agent")[0]
        assert not section.find_elements("css selector", "button.merge, button.discard, button.merge-anyway")
        assert "still running" in section.find_element("css selector", ".cannot").text
        assert by_css(browser, "h1 .state")[0].text == "waiting"
        question.find_element("css selector", "button.allow").click()
        wait_for(browser, lambda d: berth_json(home, "run", "list")[0]["state"] == "ended", timeout=30)
    [ended] = berth_json(home, "run", "list")
    assert [a["state"] for a in ended["agents"]] == ["done"], ended
    worktree = ended["agents"][0]["worktree"]
    with open(f"{worktree}/out.txt") as f:
        assert f.read() == "from the page\n"


CRASHING_AGENT = "import sys\nsys.stdin.readline()\nsys.stderr.write('fatal: out of memory\\n')\nsys.exit(3)\n"


def test_merge_follows_the_evidence_and_a_failed_check_is_folded_under_its_agent(home, provider, browser, tmp_path):
    """An agent that crashed shows no Merge; one whose check failed shows Merge disabled with
    the reason, its check's last lines folded under its card, and an explicit Merge anyway
    whose confirmation names the reason; accepting it merges."""
    repo = git_repo(tmp_path / "repo")
    with open(repo / "crash.py", "w") as f:
        f.write(CRASHING_AGENT)
    subprocess.run(["git", "add", "crash.py"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "crash"], cwd=repo, check=True)
    provider.push(Reply().tool("w1", "write_file", {"path": "out.txt", "content": "work\n"}))
    provider.push(Reply().text("Done."))
    ran = subprocess.run(
        [BERTH, "run", "Write out.txt", "--agent", "cmd:python3 crash.py", "--agent", "berth",
         "--allow", "write_file", "--check", "echo output-begins; seq 1 25; false"],
        cwd=repo, env=env_for(home, provider), capture_output=True, text=True, timeout=120,
    )
    assert ran.returncode == 1, ran.stderr + ran.stdout
    [run] = berth_json(home, "run", "list")
    run_id = run["id"]
    assert run["review"]["stage"] == "review", run

    with serving(home, provider) as base:
        sign_in(browser, base)
        browser.get(f"{base}/runs/{run_id}")
        sections = {s.get_attribute("data-agent"): s for s in wait_for(browser, lambda d: by_css(d, ".compare section.agent"))}
        assert by_css(browser, "h1 .state")[0].text == "review 1✗"
        crashed, failing = sections["1"], sections["2"]
        # The crash: nothing to merge, and why.
        assert not [b for b in crashed.find_elements("css selector", "button.merge, button.merge-only") if b.is_enabled()]
        assert not crashed.find_elements("css selector", "button.merge-anyway")
        assert "agent 1 failed" in crashed.find_element("css selector", ".refusal").text
        assert "not run" in crashed.find_element("css selector", "dd.check").text
        assert not crashed.find_elements("css selector", "details.check-output")
        # The failing check: Merge disabled with the reason; its output folded, then shown.
        merge = failing.find_element("css selector", "button.merge")
        assert not merge.is_enabled()
        assert "check failed (exit 1)" in merge.get_attribute("title")
        folded = failing.find_element("css selector", "details.check-output")
        assert folded.get_attribute("open") is None
        assert "exit 1" in folded.find_element("css selector", "summary").text
        folded.find_element("css selector", "summary").click()
        lines = folded.find_element("css selector", "pre").text
        assert lines.endswith("25") and "output-begins" not in lines, lines
        assert f"berth run logs {run_id} --agent 2 --check" in folded.text
        screenshot(browser, "review-refused", DESKTOP)
        # Forcing is explicit, and its confirmation names the reason.
        failing.find_element("css selector", "button.merge-anyway").click()
        alert = browser.switch_to.alert
        assert "agent 2's check failed (exit 1)" in alert.text, alert.text
        alert.accept()
        wait_for(
            browser,
            lambda d: subprocess.run(["git", "show", "main:out.txt"], cwd=repo, capture_output=True, text=True).stdout
            == "work\n",
            timeout=30,
        )
    shown = berth_json(home, "run", "show", run_id)
    # Merge (not "and drop the others") keeps the other agent, as pick --keep-others does.
    assert [a.get("outcome") for a in shown["agents"]] == ["kept", "merged"], shown
