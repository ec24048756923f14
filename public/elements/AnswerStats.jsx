export default function AnswerStats() {
  return (
    <div className="text-xs text-muted-foreground" data-testid="answer-stats">
      {props.text}
    </div>
  );
}
