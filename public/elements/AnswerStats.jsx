import { Button } from "@/components/ui/button";
import { BookOpen, ChevronLeft, ChevronRight, CloudOff, FileJson, FileText, GitBranch } from "lucide-react";

// The line by a message: an answer's stats and export buttons, "‹ 2/3 ›" by a message with other versions,
// "continue in a new chat", the passages of documents the answer was given (each opens in the side view), and
// a mark while the history has not saved the message yet.
// One element per message: no extra message per answer to send or move.
const ICONS = { export_markdown: FileText, export_json: FileJson };

export default function AnswerStats() {
  const act = (name, payload) => () => callAction({ name, payload });
  const iconButton = (label, Icon, testId, onClick) => (
    <Button
      variant="ghost"
      size="icon"
      className="h-6 w-6 text-muted-foreground"
      title={label}
      aria-label={label}
      data-testid={testId}
      disabled={!onClick}
      onClick={onClick}
    >
      <Icon className="h-4 w-4" />
    </Button>
  );
  const versions = props.versions;
  const sources = props.sources;
  const to = (id) => id && act(versions.action, { id });
  return (
    <div className="flex flex-col gap-1">
    {sources && (
      <div className="flex flex-wrap items-center gap-1 text-xs text-muted-foreground" data-testid="sources">
        <BookOpen className="h-3.5 w-3.5" aria-hidden="true" />
        <span className="mr-1">{sources.title}</span>
        {sources.items.map(({ label, passage }, index) => (
          <Button
            key={passage}
            variant="outline"
            size="sm"
            className="h-6 px-1.5 text-xs"
            title={label}
            data-testid="source"
            onClick={act(sources.action, { passage })}
          >
            [{index + 1}] {label}
          </Button>
        ))}
      </div>
    )}
    {props.unsaved && (
      <div
        className="flex items-center gap-1 text-xs text-amber-600 dark:text-amber-400"
        data-testid="unsaved"
        data-state={props.unsaved.state}
        role="status"
      >
        <CloudOff className="h-3.5 w-3.5" aria-hidden="true" />
        <span>{props.unsaved.label}</span>
      </div>
    )}
    <div className="flex flex-wrap items-center gap-1 text-xs text-muted-foreground" data-testid="message-line">
      {versions && (
        <span className="flex items-center" data-testid="versions">
          {iconButton(versions.labels.previous, ChevronLeft, "previous-version", to(versions.previous))}
          <span data-testid="version-at">
            {versions.at}/{versions.of}
          </span>
          {iconButton(versions.labels.next, ChevronRight, "next-version", to(versions.next))}
        </span>
      )}
      {props.text && (
        <span className="mr-1" data-testid="answer-stats">
          {props.text}
        </span>
      )}
      {(props.exports || []).map(({ name, label }) => {
        const Icon = ICONS[name];
        return (
          <Button
            key={name}
            variant="ghost"
            size="sm"
            className="h-6 gap-1 px-1.5 text-xs text-muted-foreground"
            title={label}
            onClick={act(name, {})}
          >
            <Icon className="h-3.5 w-3.5" />
            {label}
          </Button>
        );
      })}
      {props.fork && iconButton(props.fork.label, GitBranch, "fork", act(props.fork.name, props.fork.payload))}
    </div>
    </div>
  );
}
