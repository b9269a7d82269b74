// berth's page script: the live parts only. Every page works as plain HTML; this fills in
// the git state of the workspace list, streams a session, sends prompts and answers, and
// refreshes the runs. Text from the server goes in as textContent; HTML only as the server
// rendered (and escaped) it.
"use strict";

const csrf = document.querySelector('meta[name="berth-csrf"]')?.content ?? "";

async function post(url, fields) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "x-berth-csrf": csrf, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(fields ?? {}),
    credentials: "same-origin",
  });
  if (!response.ok) {
    const text = await response.text();
    const page = new DOMParser().parseFromString(text, "text/html");
    throw new Error(page.querySelector(".problem")?.textContent || text || response.statusText);
  }
  return response.json();
}

function say(message) {
  const status = document.getElementById("turn-status");
  if (status) status.textContent = message;
  else window.alert(message);
}

// The browser's own notifications, once the person allowed them ("Notify me"): a session the
// page watches needs an answer or has answered, a run the page shows ended. Only while the
// page is out of sight: what is on screen needs no notification.
function notifyPerson(title, body, tag) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  if (document.visibilityState === "visible" && document.hasFocus()) return;
  new Notification(title, { body, tag });
}

function offerNotifications() {
  const button = document.getElementById("notify-me");
  if (!button || !("Notification" in window)) return;
  const show = () => {
    button.hidden = Notification.permission !== "default";
  };
  show();
  button.addEventListener("click", async () => {
    await Notification.requestPermission();
    show();
  });
}
offerNotifications();

// Buttons that POST (new session, stop a turn, stop a run).
document.addEventListener("click", async (event) => {
  const button = event.target.closest(".js-post");
  if (!button) return;
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  button.disabled = true;
  try {
    const answer = await post(button.dataset.action);
    if (answer.location) window.location.assign(answer.location);
  } catch (e) {
    say(e.message);
  } finally {
    button.disabled = false;
  }
});

function workspaces() {
  const rows = [...document.querySelectorAll("tr[data-workspace]")];
  if (rows.length === 0) return;
  const ids = rows.map((r) => r.dataset.workspace).join(",");
  fetch(`/w/status?ids=${encodeURIComponent(ids)}`, { credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : {}))
    .then((found) => {
      for (const row of rows) {
        const s = found[row.dataset.workspace];
        const cell = (name) => row.querySelector(`[data-fill="${name}"]`);
        if (!s) {
          row.querySelectorAll(".pending").forEach((p) => (p.textContent = "?"));
          continue;
        }
        cell("sessions").textContent = String(s.sessions);
        if (s.branch !== null) {
          const branch = cell("branch");
          branch.textContent = "";
          const code = document.createElement("code");
          code.textContent = s.branch;
          branch.append(code, ` ↑${s.ahead ?? "?"} ↓${s.behind ?? "?"}`);
          if (s.health && s.health !== "ok") branch.append(` (${s.health})`);
          cell("changes").textContent =
            s.changed_files === null
              ? "?"
              : s.changed_files === 0
                ? "clean"
                : `${s.changed_files} ${s.changed_files === 1 ? "file" : "files"}`;
        }
      }
    });
}

function session() {
  const transcript = document.getElementById("transcript");
  const streaming = document.getElementById("streaming");
  const streamText = streaming.querySelector(".text");
  const permissions = document.getElementById("permissions");
  const form = document.getElementById("prompt");
  const id = transcript.dataset.session;
  const atBottom = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  const follow = (wasAtBottom) => {
    if (wasAtBottom) window.scrollTo(0, document.body.scrollHeight);
  };

  const handlers = {
    message(data) {
      const bottom = atBottom();
      transcript.insertAdjacentHTML("beforeend", data.html);
      transcript.dataset.have = String(Number(transcript.dataset.have) + 1);
      if (data.role === "assistant") {
        streamText.textContent = "";
        streaming.hidden = true;
      }
      follow(bottom);
    },
    reload() {
      window.location.reload();
    },
    started() {
      streamText.textContent = "";
      say("Answering…");
    },
    text(data) {
      const bottom = atBottom();
      streaming.hidden = false;
      streamText.textContent += data.text;
      follow(bottom);
    },
    tool(data) {
      say(`Running ${data.name}…`);
    },
    notice(data) {
      say(data.message);
    },
    permission(data) {
      if (document.getElementById(`permission-${data.id}`)) return;
      notifyPerson(`berth: ${document.title} needs you`, `allow ${data.tool}?`, `permission-${data.id}`);
      const box = document.createElement("div");
      box.className = "permission";
      box.id = `permission-${data.id}`;
      box.setAttribute("role", "alertdialog");
      const title = document.createElement("p");
      const strong = document.createElement("strong");
      strong.textContent = data.tool;
      title.append("The agent asks to use ", strong);
      const what = document.createElement("pre");
      what.textContent = data.description;
      const actions = document.createElement("div");
      actions.className = "actions";
      for (const [decision, label] of [["allow_once", "Allow"], ["allow_always", "Always allow"], ["reject", "Reject"]]) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = label;
        b.dataset.decision = decision;
        if (decision === "reject") b.className = "secondary";
        b.addEventListener("click", async () => {
          actions.querySelectorAll("button").forEach((x) => (x.disabled = true));
          try {
            await post(`/s/${id}/permission`, { id: data.id, decision });
          } catch (e) {
            say(e.message);
          }
        });
        actions.append(b);
      }
      box.append(title, what, actions);
      permissions.append(box);
    },
    settled(data) {
      document.getElementById(`permission-${data.id}`)?.remove();
    },
    ended(data) {
      notifyPerson(`berth: ${document.title}`, data.stop === "end_turn" ? "answered" : `the turn ended: ${data.stop}`, `ended-${id}`);
      say(data.message ? `The turn ${data.stop === "failed" ? "failed" : "ended"}: ${data.message}` : data.stop === "end_turn" ? "" : `The turn ended: ${data.stop}`);
    },
  };

  let source = null;
  const connect = () => {
    source = new EventSource(`/s/${id}/events?have=${transcript.dataset.have}`);
    for (const [name, handle] of Object.entries(handlers)) {
      source.addEventListener(name, (e) => handle(JSON.parse(e.data)));
    }
    // Reconnect from what the page holds now, not from where it first started.
    source.onerror = () => {
      source.close();
      setTimeout(connect, 1000);
    };
  };
  connect();

  const text = form.querySelector("textarea");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const prompt = text.value.trim();
    if (!prompt) return;
    const send = form.querySelector('button[type="submit"]');
    send.disabled = true;
    try {
      const answer = await post(form.dataset.action, { text: prompt });
      text.value = "";
      // A slash command's answer, shown until the next one.
      const said = document.getElementById("said");
      said.hidden = !answer.said;
      said.textContent = answer.said ?? "";
    } catch (e) {
      say(e.message);
    } finally {
      send.disabled = false;
    }
  });
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
}

function runs() {
  const holder = document.getElementById("runs");
  const states = () =>
    new Map([...holder.querySelectorAll("section.run")].map((r) => [r.dataset.run, r.dataset.state]));
  setInterval(async () => {
    const response = await fetch(holder.dataset.refresh, { credentials: "same-origin" });
    if (!response.ok) return;
    const before = states();
    holder.innerHTML = await response.text();
    for (const [run, state] of states()) {
      if (before.get(run) === "running" && state !== "running") {
        const task = holder.querySelector(`section.run[data-run="${run}"] .task`)?.textContent ?? "";
        notifyPerson(`berth run ${state}`, task, `run-${run}`);
      }
    }
  }, 1000);
}

// A run's review: Tell forms, and a comment on a line of a diff, told to that agent.
function review() {
  // A land under way: the page is read again every two seconds until it is through, unless
  // something is being typed.
  if (document.querySelector(".compare[data-landing]")) {
    setInterval(() => {
      const typing = [...document.querySelectorAll("textarea")].some((t) => t.value.trim());
      if (!typing) window.location.reload();
    }, 2000);
  }
  for (const form of document.querySelectorAll("form.tell")) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = form.querySelector("textarea").value.trim();
      if (!text) return;
      try {
        const answer = await post(form.dataset.action, { text });
        if (answer.location) window.location.assign(answer.location);
      } catch (e) {
        say(e.message);
      }
    });
  }
  const open = (line) => {
    if (line.nextElementSibling?.classList.contains("comment-box")) return;
    const diff = line.closest(".diff");
    const box = document.createElement("form");
    box.className = "comment-box";
    const text = document.createElement("textarea");
    text.rows = 2;
    text.required = true;
    text.placeholder = `Comment on ${line.dataset.file} line ${line.dataset.line}…`;
    const send = document.createElement("button");
    send.type = "submit";
    send.textContent = "Comment";
    box.append(text, send);
    line.after(box);
    text.focus();
    box.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!text.value.trim()) return;
      send.disabled = true;
      try {
        const answer = await post(diff.dataset.comment, {
          file: line.dataset.file,
          line: line.dataset.line,
          quoted: line.querySelector(".text").textContent,
          text: text.value,
        });
        if (answer.location) window.location.assign(answer.location);
      } catch (e) {
        say(e.message);
        send.disabled = false;
      }
    });
  };
  document.addEventListener("click", (event) => {
    const line = event.target.closest(".diff .line[data-line]");
    if (line) open(line);
  });
  document.addEventListener("keydown", (event) => {
    const line = event.target.closest?.(".diff .line[data-line]");
    if (line && event.key === "Enter") open(line);
  });
}

async function pair() {
  const status = document.getElementById("pair-status");
  const token = new URLSearchParams(window.location.hash.slice(1)).get("token");
  // The token leaves the address bar and the history at once.
  window.history.replaceState(null, "", "/pair");
  if (!token) {
    status.textContent = "This link carries no token; paste one on the sign-in page.";
    return;
  }
  const response = await fetch("/login", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token }),
    credentials: "same-origin",
  });
  if (response.ok) window.location.replace("/");
  else status.textContent = "This link's token is not valid any more; ask for a new one.";
}

const pages = { workspaces, session, runs, review, pair };
pages[document.body.dataset.page]?.();
