"""A freedesktop notification service on a D-Bus session bus, for the tests: it owns
org.freedesktop.Notifications, answers as a desktop would, and prints each notification it is
sent as a JSON line ({"app", "summary", "body", "urgency"}) on standard output. Run with
DBUS_SESSION_BUS_ADDRESS set to the test's own bus."""

import json
import sys

from jeepney import HeaderFields, MessageType, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

NAME = "org.freedesktop.Notifications"


def main():
    conn = open_dbus_connection(bus="SESSION")
    conn.send_and_get_reply(message_bus.RequestName(NAME))
    print("ready", flush=True)
    sent = 0
    while True:
        msg = conn.receive()
        if msg.header.message_type != MessageType.method_call:
            continue
        member = msg.header.fields.get(HeaderFields.member)
        if member == "Notify":
            app, _replaces, _icon, summary, body, _actions, hints, _timeout = msg.body
            urgency = hints.get("urgency", ("y", 1))[1]
            print(json.dumps({"app": app, "summary": summary, "body": body, "urgency": urgency}), flush=True)
            sent += 1
            conn.send(new_method_return(msg, "u", (sent,)))
        elif member == "GetServerInformation":
            conn.send(new_method_return(msg, "ssss", ("fake", "berth-tests", "1", "1.2")))
        elif member == "GetCapabilities":
            conn.send(new_method_return(msg, "as", (["body"],)))
        else:
            conn.send(new_method_return(msg))


if __name__ == "__main__":
    sys.exit(main())
