// A stock useChat page: `DefaultChatTransport({ api })` pointed at the app's own server, and no
// handling of any chunk of its own. It renders what useChat holds, and records every assistant
// text it ever rendered in `window.shown`, so a test can tell that nothing else was on screen.
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport } from "ai";
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";

const query = new URLSearchParams(location.search);
const session = query.get("session");
const transport = new DefaultChatTransport({ api: "/api/chat" });
window.shown = [];

function textOf(message) {
  return message.parts.map((part) => (part.type === "text" ? part.text : "")).join("");
}

function Chat() {
  const [progress, setProgress] = useState([]);
  const { messages, status, error, sendMessage } = useChat({
    id: session,
    resume: query.get("resume") === "1",
    transport,
    onData: (part) => setProgress((states) => [...states, part.data?.state]),
  });
  useEffect(() => {
    for (const message of messages) {
      if (message.role === "assistant") window.shown.push(textOf(message));
    }
  }, [messages]);
  return (
    <main>
      <p id="status">{status}</p>
      <p id="error">{error?.message ?? ""}</p>
      <p id="progress">{progress.join(" ")}</p>
      <button id="send" onClick={() => sendMessage({ text: "Tell me a story" })}>
        send
      </button>
      <ol id="messages">
        {messages.map((message) => (
          <li key={message.id} className={message.role} data-id={message.id}>
            {message.parts.map((part, i) =>
              part.type === "text" ? (
                <span key={i} className="text">
                  {part.text}
                </span>
              ) : null,
            )}
            <span className="typed-error">{message.metadata?.terminus?.error?.message ?? ""}</span>
          </li>
        ))}
      </ol>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);
