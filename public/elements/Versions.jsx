import { Button } from "@/components/ui/button";
import { ChevronLeft, ChevronRight } from "lucide-react";

// "‹ 2/3 ›" by a message with other versions: each button shows the version before or after it, in place.
export default function Versions() {
  const step = (id, label, Icon, testId) => (
    <Button
      variant="ghost"
      size="icon"
      className="h-6 w-6 text-muted-foreground"
      title={label}
      aria-label={label}
      data-testid={testId}
      disabled={!id}
      onClick={() => callAction({ name: props.action, payload: { id } })}
    >
      <Icon className="h-4 w-4" />
    </Button>
  );
  return (
    <div className="flex items-center gap-0.5 text-xs text-muted-foreground" data-testid="versions">
      {step(props.previous, props.labels.previous, ChevronLeft, "previous-version")}
      <span data-testid="version-at">
        {props.at}/{props.of}
      </span>
      {step(props.next, props.labels.next, ChevronRight, "next-version")}
    </div>
  );
}
