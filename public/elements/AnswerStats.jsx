import { Button } from "@/components/ui/button";
import { FileJson, FileText } from "lucide-react";

// The export buttons ride on every answer's stats line: no extra message per answer to send or move.
const ICONS = { export_markdown: FileText, export_json: FileJson };

export default function AnswerStats() {
  return (
    <div className="flex flex-wrap items-center gap-1 text-xs text-muted-foreground" data-testid="answer-stats">
      <span className="mr-1">{props.text}</span>
      {(props.exports || []).map(({ name, label }) => {
        const Icon = ICONS[name];
        return (
          <Button
            key={name}
            variant="ghost"
            size="sm"
            className="h-6 gap-1 px-1.5 text-xs text-muted-foreground"
            title={label}
            onClick={() => callAction({ name, payload: {} })}
          >
            <Icon className="h-3.5 w-3.5" />
            {label}
          </Button>
        );
      })}
    </div>
  );
}
