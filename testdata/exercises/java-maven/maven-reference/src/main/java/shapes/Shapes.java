package shapes;

import java.util.ArrayList;
import java.util.List;

/** Small geometry and text helpers for the reference exercise's tests. */
public final class Shapes {
    private Shapes() {}

    /** The area of a rectangle; negative sides are refused. */
    public static long rectangleArea(long width, long height) {
        if (width < 0 || height < 0) {
            throw new IllegalArgumentException("negative side: " + width + " x " + height);
        }
        return Math.multiplyExact(width, height);
    }

    /** The perimeter of a rectangle. */
    public static long rectanglePerimeter(long width, long height) {
        return 2 * (width + height);
    }

    /** Whether three sides make a triangle. */
    public static boolean isTriangle(long a, long b, long c) {
        return a > 0 && b > 0 && c > 0 && a + b > c && a + c > b && b + c > a;
    }

    /** The lines of a w x h box drawn with '#' and ' '. */
    public static List<String> box(int w, int h) {
        List<String> out = new ArrayList<>();
        for (int y = 0; y < h; y++) {
            StringBuilder row = new StringBuilder();
            for (int x = 0; x < w; x++) {
                boolean edge = y == 0 || y == h - 1 || x == 0 || x == w - 1;
                row.append(edge ? '#' : ' ');
            }
            out.add(row.toString());
        }
        return out;
    }
}
